// Two models side by side: each side asks POST /v1/explain for the same sentence with its own
// model and draws that model's source attention (a Transformer's cross-attention of one layer
// and head, or their mean; a GRU's Bahdanau weights) on one colour scale shared by both.
"use strict";

const DEBOUNCE_MS = 250;
const SIDES = ["left", "right"];

const state = {
  answers: { left: null, right: null }, // the /v1/explain answer each side shows
  timer: null,
};

// The models served; the left side opens on the first GRU, the right on the first other model.
async function loadModels() {
  let models;
  try {
    models = await (await fetch("/v1/models")).json();
  } catch (err) {
    showError("error: cannot list the models (" + err.message + ")");
    return false;
  }
  const names = models.map((model) => model.name);
  const gru = models.find((model) => model.family.includes("gru")) || models[0];
  const other = models.find((model) => model.name !== gru.name) || gru;
  const labelOf = (name) => {
    const model = models.find((m) => m.name === name);
    return `${name} (${model.source}→${model.target}, ${model.family})`;
  };
  fillSelect($("left-model"), names, labelOf, gru.name);
  fillSelect($("right-model"), names, labelOf, other.name);
  return true;
}

// Each side's newest request's answer only (common.js); an empty box asks nothing, and drops
// the answers still on their way
function explainer(side) {
  return newestOnly(async () => {
    const text = $("text").value;
    if (!text.trim()) return null;
    const body = { model: $(`${side}-model`).value, text: text, nbest: 1 };
    const payload = await ask("/v1/explain", body); // common.js
    return () => {
      const first = state.answers[side] === null || state.answers[side].model !== payload.model;
      state.answers[side] = payload;
      if (first) fillLayerHead(side, payload.first_view);
      draw();
    };
  }, "translating…");
}
const explainers = { left: explainer("left"), right: explainer("right") };
const explain = (side) => explainers[side]();

function explainBoth() {
  clearTimeout(state.timer);
  state.timer = setTimeout(() => SIDES.forEach(explain), DEBOUNCE_MS);
}

// The layer and head choices of a side's model, opening on the API's first_view.
function fillLayerHead(side, firstView) {
  const maps = state.answers[side].hypotheses[0].maps;
  const layers = "cross" in maps ? maps.cross : [[maps.bahdanau]];
  const heads = layers[0].map((_, h) => h);
  fillSelect($(`${side}-layer`), [...layers.keys()], (l) => `${l + 1} of ${layers.length}`,
    firstView.layer);
  fillSelect($(`${side}-head`), heads.length > 1 ? ["mean", ...heads] : [0],
    (h) => (h === "mean" ? "mean of heads" : `${h + 1} of ${heads.length}`), firstView.head);
  $(`${side}-layer`).disabled = layers.length === 1;
  $(`${side}-head`).disabled = heads.length === 1;
}

// The side's source attention (target pieces x source pieces) for its layer and head.
function sourceAttention(side) {
  const maps = state.answers[side].hypotheses[0].maps;
  if ("bahdanau" in maps) return maps.bahdanau;
  const heads = maps.cross[Number($(`${side}-layer`).value)];
  const head = $(`${side}-head`).value;
  return head === "mean" ? meanOfHeads(heads) : heads[Number(head)];
}

// Both sides on one colour scale: from 0 to the largest weight either shows.
function draw() {
  const shown = SIDES.filter((side) => state.answers[side] !== null);
  const weights = Object.fromEntries(shown.map((side) => [side, sourceAttention(side)]));
  const top = Math.max(...shown.map((side) => largest(weights[side]))) || 1;
  for (const side of shown) {
    const answer = state.answers[side];
    const hypothesis = answer.hypotheses[0];
    const axes = mapAxes("cross", answer.source.pieces, hypothesis.pieces);
    drawMapTable($(`${side}-heatmap`), weights[side], axes, top);
    $(`${side}-translation`).textContent = hypothesis.text;
    Object.assign($(side).dataset, {
      model: answer.model,
      text: $("text").value,
      layer: $(`${side}-layer`).value,
      head: $(`${side}-head`).value,
    });
  }
  $("heatmap-legend").replaceChildren(legend((v) => colour(v, top), 0, top));
}

$("text").addEventListener("input", explainBoth);
for (const side of SIDES) {
  $(`${side}-model`).addEventListener("change", () => explain(side));
  $(`${side}-layer`).addEventListener("change", draw);
  $(`${side}-head`).addEventListener("change", draw);
}
loadModels().then((listed) => listed && SIDES.forEach(explain));
