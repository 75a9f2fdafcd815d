// Attention through training: the maps a run saved at each validation
// (GET /v1/run/attention), one step at a time (GET /v1/run/attention/{step}/{sentence}).
"use strict";

const VIEW_TITLES = {
  cross: "cross-attention",
  encoder_self: "encoder self-attention",
  decoder_self: "decoder self-attention",
  bahdanau: "Bahdanau attention",
};

const state = {
  index: null, // the answer of /v1/run/attention: sentences, map names, steps
  maps: null, // the maps of the step and sentence shown
  latest: 0, // number of the newest request; older answers are dropped
};

// The JSON answer of `url`, or null after showing why there is none.
async function getJson(url) {
  let answer, payload;
  try {
    answer = await fetch(url);
    payload = await answer.json();
  } catch (err) {
    showError("error: no answer from the server (" + err.message + ")");
    return null;
  }
  if (!answer.ok) {
    showError(payload.error || `error: the server answered ${answer.status}`);
    return null;
  }
  showError("");
  return payload;
}

async function loadIndex() {
  const index = await getJson("/v1/run/attention");
  if (index === null) return;
  state.index = index;
  $("run").textContent = `Run ${index.run} (${index.arch}): ${index.steps.length} snapshots, ` +
    `steps ${index.steps[0]} to ${index.steps[index.steps.length - 1]}.`;
  const numbers = index.sentences.map((_, n) => n);
  fillSelect($("sentence"), numbers, (n) => index.sentences[n].source, 0);
  $("step").max = String(index.steps.length - 1);
  $("step").value = $("step").max; // the latest first
  const views = Object.keys(VIEW_TITLES).filter((view) => index.maps.includes(view));
  fillSelect($("view"), views, (view) => VIEW_TITLES[view], views[0]);
  await loadMaps();
}

async function loadMaps() {
  const number = ++state.latest;
  const step = state.index.steps[Number($("step").value)];
  const sentence = Number($("sentence").value);
  $("step-shown").textContent = `step ${step}`;
  $("status").textContent = "loading…";
  const maps = await getJson(`/v1/run/attention/${step}/${sentence}`);
  if (number !== state.latest) return; // a newer request was sent meanwhile
  $("status").textContent = "";
  if (maps === null) return;
  state.maps = maps;
  draw();
}

// The layers x heads x rows x columns of a view (the GRU's one map is 1 x 1).
function stack(view) {
  const weights = state.maps.maps[view];
  return view === "bahdanau" ? [[weights]] : weights;
}

function draw() {
  const view = $("view").value;
  const layers = stack(view);
  const heads = layers[0].length;
  const given = $("layer").value; // the last layer first
  const layer = given === "" ? layers.length - 1 : Math.min(Number(given), layers.length - 1);
  const head = $("head").value === "mean" || $("head").value === "" ? "mean" : Number($("head").value);
  fillSelect($("layer"), [...layers.keys()], (l) => `${l + 1} of ${layers.length}`, layer);
  const headChoices = heads > 1 ? ["mean", ...layers[0].map((_, h) => h)] : [0];
  fillSelect($("head"), headChoices, (h) => (h === "mean" ? "mean of heads" : `${h + 1} of ${heads}`), head);
  $("layer").disabled = layers.length === 1;
  $("head").disabled = heads === 1;
  const chosen = $("head").value;
  const weights = chosen === "mean" ? meanOfHeads(layers[layer]) : layers[layer][Number(chosen)];
  const sentence = state.index.sentences[state.maps.sentence];
  drawMapTable($("heatmap"), weights, mapAxes(view, sentence.src_pieces, sentence.tgt_pieces), 1);
  $("heatmap-legend").replaceChildren(legend((v) => colour(v, 1), 0, 1));
  Object.assign($("training").dataset, {
    step: String(state.maps.step),
    sentence: String(state.maps.sentence),
    view: view,
    layer: String(layer),
    head: chosen,
  });
}

$("step").addEventListener("input", loadMaps);
$("sentence").addEventListener("change", loadMaps);
for (const id of ["view", "layer", "head"]) $(id).addEventListener("change", () => state.maps && draw());
loadIndex();
