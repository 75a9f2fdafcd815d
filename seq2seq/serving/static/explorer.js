// The attention explorer: asks POST /v1/explain for a sentence's translations and attention
// maps, and draws them. Plain JavaScript, no library, no build step.
"use strict";

const DEBOUNCE_MS = 250;
const MAX_NBEST = 5;
const VIEWS = {
  cross: {
    title: "cross-attention",
    formula: "A = softmax(Q_dec K_enc^T / sqrt(d)): target piece (row) over source piece (column)",
  },
  encoder_self: {
    title: "encoder self-attention",
    formula: "A = softmax(Q K^T / sqrt(d)), padding masked: source piece over source piece",
  },
  decoder_self: {
    title: "decoder self-attention",
    formula: "A = softmax(Q K^T / sqrt(d)), causal mask: each input sees itself and its past",
  },
  bahdanau: {
    title: "Bahdanau attention",
    formula: "a_tj = softmax_j(w_v^T tanh(W_q s_{t-1} + W_k h_j)): one map, one row per step",
  },
};

const state = {
  payload: null, // the answer of /v1/explain shown
  shown: "", // the text it answers
  text: "", // the text in the box
  target: "", // the target the answer shown was asked for ("": the model's own translations)
  chosen: 0, // the hypothesis whose maps are shown
  sentence: 0, // the sentence of the text shown (the server cuts the text into sentences)
  view: null,
  layer: 0,
  head: "mean",
  timer: null,
};

// ---- talking to the server -------------------------------------------------------------

async function loadModels() {
  let models = [];
  try {
    const answer = await fetch("/v1/models");
    models = await answer.json();
  } catch (err) {
    showError("error: cannot list the models (" + err.message + ")");
    return;
  }
  const select = $("model");
  for (const model of models) {
    const label = `${model.name} (${model.source}→${model.target}, ${model.family})`;
    select.append(element("option", { value: model.name }, label));
  }
}

// The newest request's answer only (common.js). With a target in its box, the answer is that
// target alone, teacher-forced (the search's fields do not apply).
const explain = newestOnly(async (text, hypothesis, sentence = 0) => {
  const beam = Number($("beam").value);
  const target = $("target").value.trim();
  const body = {
    model: $("model").value,
    text: text,
    sentence: sentence,
    beam: beam,
    nbest: Math.min(beam, MAX_NBEST),
    hypothesis: hypothesis,
    beam_tree: treeWanted(), // beam_tree.js
  };
  if (target) body.target = target;
  const payload = await ask("/v1/explain", body); // common.js
  return () => show(payload, text, hypothesis, target);
}, "translating…");

function show(payload, text, hypothesis, target) {
  // A new model opens on its first view (the last layer's sharpest head); after that the
  // page keeps the view, layer and head the reader picked.
  const firstView = payload.first_view;
  if (firstView && (state.payload === null || state.payload.model !== payload.model)) {
    state.view = firstView.view;
    state.layer = firstView.layer;
    state.head = firstView.head;
  }
  state.payload = payload;
  state.shown = text;
  state.target = target;
  state.chosen = hypothesis;
  state.sentence = payload.sentence;
  render();
}

function scheduleExplain() {
  clearTimeout(state.timer);
  state.text = $("text").value;
  state.timer = setTimeout(() => explain(state.text, 0), DEBOUNCE_MS);
}

// A new target: the text in the box explained on it (the same sentence, if the text is the one
// shown).
function scheduleTarget() {
  clearTimeout(state.timer);
  if (!state.text) return;
  const sentence = state.text === state.shown ? state.sentence : 0;
  state.timer = setTimeout(() => explain(state.text, 0, sentence), DEBOUNCE_MS);
}

// What the page shows the maps of.
function pairShown() {
  return state.target ? "your target, teacher-forced" : "the model's translation";
}

// ---- the maps ----------------------------------------------------------------------------

function hypothesis() {
  return state.payload.hypotheses[state.chosen];
}

function viewNames() {
  return Object.keys(VIEWS).filter((view) => view in hypothesis().maps);
}

// layers x heads x rows x columns, whatever the view (the GRU's one map is 1 x 1).
function stack(view) {
  const weights = hypothesis().maps[view];
  return view === "bahdanau" ? [[weights]] : weights;
}

function matrix(view, layer, head) {
  const heads = stack(view)[layer];
  return head === "mean" ? meanOfHeads(heads) : heads[head];
}

function drawHeatmap() {
  const weights = matrix(state.view, state.layer, state.head);
  const top = largest(weights) || 1;
  const axes = mapAxes(state.view, state.payload.source.pieces, hypothesis().pieces);
  drawMapTable($("heatmap"), weights, axes, top);
  markLinks($("heatmap"));
  $("heatmap-legend").replaceChildren(legend((v) => colour(v, top), 0, top));
  $("map-formula").textContent = VIEWS[state.view].formula;
}

// The word alignment on a map of target pieces over source pieces: every cell whose target
// word is linked to its source word is outlined, and a gold link (gold.js) marked in it.
function markLinks(table) {
  if (state.view !== "cross" && state.view !== "bahdanau") return;
  const linked = new Set((hypothesis().alignment || []).map(([u, v]) => `${u}-${v}`));
  const srcWord = state.payload.source.word_of_piece;
  const tgtWord = hypothesis().word_of_piece;
  for (const cell of table.querySelectorAll("td.cell")) {
    const { row, col } = cell.dataset;
    if (linked.has(`${tgtWord[row]}-${srcWord[col]}`)) cell.classList.add("linked");
    const mark = goldMark(tgtWord[row], srcWord[col]); // gold.js
    if (mark) cell.classList.add(mark);
  }
}

function highlightCell(event) {
  const cell = event.target.closest("td.cell");
  for (const node of $("heatmap").querySelectorAll(".active")) node.classList.remove("active");
  if (!cell) return;
  const { row, col } = cell.dataset;
  $("heatmap").querySelector(`tbody th[data-row="${row}"]`).classList.add("active");
  $("heatmap").querySelector(`thead th[data-col="${col}"]`).classList.add("active");
}

function drawThumbnail(canvas, weights, top) {
  canvas.width = weights[0].length;
  canvas.height = weights.length;
  const context = canvas.getContext("2d");
  weights.forEach((row, i) =>
    row.forEach((value, j) => {
      context.fillStyle = colour(value, top);
      context.fillRect(j, i, 1, 1);
    }),
  );
}

function drawGrid() {
  const grid = $("grid");
  grid.replaceChildren();
  const layers = stack(state.view);
  const heads = layers[0].length;
  const columns = heads > 1 ? heads + 1 : 1;
  grid.style.gridTemplateColumns = `repeat(${columns}, minmax(3rem, 8rem))`;
  layers.forEach((_, layer) => {
    const choices = heads > 1 ? [...Array(heads).keys(), "mean"] : [0];
    for (const head of choices) {
      const name = head === "mean" ? `layer ${layer + 1}, mean` : `layer ${layer + 1}, head ${head + 1}`;
      const figure = element("figure", { "data-layer": layer, "data-head": head });
      if (layer === state.layer && String(head) === String(state.head)) figure.classList.add("chosen");
      const canvas = element("canvas", { class: "thumb", "aria-label": name });
      const weights = matrix(state.view, layer, head);
      const top = largest(weights) || 1;
      drawThumbnail(canvas, weights, top);
      const caption = element("figcaption", {}, state.view === "bahdanau" ? "" : name);
      figure.append(canvas, caption, legend((v) => colour(v, top), 0, top));
      figure.addEventListener("click", () => {
        state.layer = layer;
        state.head = head;
        renderMap();
      });
      grid.append(figure);
    }
  });
}

function renderMap() {
  const views = viewNames();
  if (!views.includes(state.view)) state.view = views[0];
  const layers = stack(state.view);
  const heads = layers[0].length;
  state.layer = Math.min(state.layer, layers.length - 1);
  if (state.head !== "mean" && state.head >= heads) state.head = "mean";
  if (heads === 1) state.head = 0;
  fillSelect($("view"), views, (v) => VIEWS[v].title, state.view);
  fillSelect($("layer"), [...layers.keys()], (l) => `${l + 1} of ${layers.length}`, state.layer);
  const headChoices = heads > 1 ? ["mean", ...Array(heads).keys()] : [0];
  fillSelect($("head"), headChoices, (h) => (h === "mean" ? "mean of heads" : `${h + 1} of ${heads}`), state.head);
  $("layer").disabled = layers.length === 1;
  $("head").disabled = heads === 1;
  drawHeatmap();
  drawGrid();
  colourPieces(null, null);
}

// ---- pieces, hovering, alignment ---------------------------------------------------------

// The source attention used when hovering pieces: cross-attention of the chosen decoder layer
// and head (the Bahdanau weights for the GRU).
function sourceAttention() {
  if ("bahdanau" in hypothesis().maps) return matrix("bahdanau", 0, 0);
  const layer = Math.min(state.layer, stack("cross").length - 1);
  return matrix("cross", layer, state.head);
}

function drawPieces(container, pieces, side) {
  container.replaceChildren(element("span", { class: "hint" }, side === "src" ? "source: " : "target: "));
  pieces.forEach((piece, i) => {
    const chip = element("span", { class: "piece", "data-index": i }, piece.replace(/^▁(.)/, "$1"));
    if (piece.startsWith("▁")) chip.classList.add("word-start");
    chip.addEventListener("mouseenter", () => colourPieces(side, i));
    chip.addEventListener("mouseleave", () => colourPieces(null, null));
    container.append(chip);
  });
}

function colourPieces(side, index) {
  const src = $("src-pieces").querySelectorAll(".piece");
  const tgt = $("tgt-pieces").querySelectorAll(".piece");
  for (const chip of [...src, ...tgt]) {
    chip.style.background = chip.style.color = "";
    chip.classList.remove("hovered");
  }
  if (side === null) return;
  const weights = sourceAttention();
  if (side === "tgt") {
    tgt[index].classList.add("hovered");
    weights[index].forEach((value, j) => paint(src[j], colour(value)));
  } else {
    src[index].classList.add("hovered");
    weights.forEach((row, i) => paint(tgt[i], colour(row[index])));
  }
}

function drawAlignment() {
  const words = (list) => list.slice(0, -1); // the EOS "word" is not aligned
  const source = words(state.payload.source.words);
  const target = words(hypothesis().words);
  const row = (container, list) => {
    container.replaceChildren(...list.map((w, i) => element("span", { class: "word", "data-index": i }, w)));
  };
  row($("align-src"), source);
  row($("align-tgt"), target);
  $("alignment-rule").textContent = "Rule: " + state.payload.alignment_rule + ".";
  drawLinks();
}

function drawLinks() {
  const svg = $("align-links");
  svg.replaceChildren();
  if (!state.payload) return;
  // As wide as the longer sentence: the rows and the links scroll sideways together.
  svg.style.width = `${Math.max($("align-src").scrollWidth, $("align-tgt").scrollWidth)}px`;
  const box = svg.getBoundingClientRect();
  const centre = (node) => {
    const r = node.getBoundingClientRect();
    return r.left + r.width / 2 - box.left;
  };
  const src = $("align-src").querySelectorAll(".word");
  const tgt = $("align-tgt").querySelectorAll(".word");
  const link = (u, v, attributes) => svgElement("line", { x1: centre(src[v]), y1: 0,
    x2: centre(tgt[u]), y2: box.height, "data-link": `${u}-${v}`, ...attributes });
  for (const [u, v, kind] of goldLinks()) { // gold.js: under the model's links
    if (src[v] && tgt[u]) svg.append(link(u, v, { class: kind, "stroke-width": 10 }));
  }
  for (const [u, v, weight] of hypothesis().alignment || []) {
    svg.append(link(u, v, { class: "model", "stroke-width": 1 + 4 * weight }));
  }
}

// ---- positional encoding -----------------------------------------------------------------

function drawPositional() {
  const panel = $("positional");
  panel.replaceChildren();
  const table = state.payload.positional;
  if (!table) {
    panel.append(element("p", {}, "The GRU has no positional encoding: its recurrence reads the " +
      "source in order, so each h_j already depends on where token j stands."));
    return;
  }
  const positions = table.length;
  const dims = table[0].length;
  panel.append(element("p", { class: "formula" },
    `PE(p, 2i) = sin(p / 10000^(2i/${dims})), PE(p, 2i+1) = cos(p / 10000^(2i/${dims})): ` +
    `positions 0..${positions - 1} (rows) x dimensions 0..${dims - 1} (columns)`));
  panel.append(positionalMatrix(table), legend(divergingColour, -1, 1), positionalCurves(table));
}

// A few dimensions of PE as curves over a continuous position (the formula above), with the
// server's values at the integer positions as dots, on axes.
function positionalCurves(table) {
  const dims = table[0].length, last = Math.max(1, table.length - 1);
  const box = { left: 50, top: 10, width: 540, height: 150 };
  const svg = svgElement("svg", { id: "pe-curves", viewBox: "0 0 760 200", width: 760 });
  const chosen = [0, 1, 4, 8, 16, 32].filter((i) => i < dims);
  const colours = ["#1c7ed6", "#e8590c", "#2b8a3e", "#862e9c", "#c92a2a", "#5c940d"];
  const x = (p) => box.left + (p * box.width) / last;
  const y = (v) => box.top + ((1 - v) * box.height) / 2;
  const pe = (p, dim) => {
    const angle = p / Math.pow(10000, (dim - (dim % 2)) / dims);
    return dim % 2 ? Math.cos(angle) : Math.sin(angle);
  };
  addAxes(svg, box, { x, y, xTicks: ticks(last, 8), yTicks: [-1, 0, 1],
    xLabel: "position p", yLabel: "PE(p, i)" });
  chosen.forEach((dim, n) => {
    const points = [];
    for (let step = 0; step <= 200; step++) points.push((last * step) / 200);
    svg.append(svgElement("polyline", { points: points.map((p) => `${x(p)},${y(pe(p, dim))}`).join(" "),
      fill: "none", stroke: colours[n], "stroke-width": 1.5 }));
    table.forEach((row, p) =>
      svg.append(svgElement("circle", { cx: x(p), cy: y(row[dim]), r: 2.5, fill: colours[n] })));
    svg.append(svgElement("text", { x: box.left + box.width + 20, y: 20 + 20 * n, fill: colours[n] },
      `dimension ${dim} (${dim % 2 ? "cos" : "sin"})`));
  });
  return svg;
}

// ---- the whole page ----------------------------------------------------------------------

function drawNbest() {
  const list = $("nbest");
  list.replaceChildren();
  state.payload.hypotheses.forEach((h, i) => {
    const item = element("li", { "data-index": i }, h.text);
    const score = h.score === null ? "not searched" : h.score.toFixed(3); // null: a target
    item.append(element("span", { class: "score" }, score));
    if (i === state.chosen) item.classList.add("chosen");
    item.tabIndex = 0; // reachable by keyboard: Enter picks it
    item.addEventListener("click", () => explain(state.shown, i, state.sentence));
    item.addEventListener("keydown",
      (e) => e.key === "Enter" && explain(state.shown, i, state.sentence));
    list.append(item);
  });
}

// A text of several sentences: a chooser of the one explained (the maps are per sentence).
function drawSentences() {
  const select = $("sentence");
  const sentences = state.payload.sentences;
  select.replaceChildren(...sentences.map((text, i) => element("option", { value: i }, text)));
  select.value = String(state.sentence);
  $("sentence-chooser").hidden = sentences.length < 2;
}

function render() {
  const result = $("result");
  result.hidden = false;
  result.dataset.text = state.shown; // what is shown, for whoever reads the page
  result.dataset.model = state.payload.model;
  result.dataset.target = state.target;
  for (const label of document.querySelectorAll(".pair-shown")) label.textContent = pairShown();
  drawSentences();
  drawNbest();
  drawPieces($("src-pieces"), state.payload.source.pieces, "src");
  drawPieces($("tgt-pieces"), hypothesis().pieces, "tgt");
  renderMap();
  drawAlignment();
  drawPositional();
  drawBeamTree(state.payload); // beam_tree.js
  goldChanged(); // gold.js
}

function start() {
  $("text").addEventListener("input", scheduleExplain);
  $("target").addEventListener("input", scheduleTarget);
  $("model").addEventListener("change", scheduleExplain);
  $("beam").addEventListener("change", scheduleExplain);
  $("sentence").addEventListener("change",
    (e) => explain(state.shown, 0, Number(e.target.value)));
  $("view").addEventListener("change", (e) => { state.view = e.target.value; renderMap(); });
  $("layer").addEventListener("change", (e) => { state.layer = Number(e.target.value); renderMap(); });
  $("head").addEventListener("change", (e) => {
    state.head = e.target.value === "mean" ? "mean" : Number(e.target.value);
    renderMap();
  });
  $("heatmap").addEventListener("mouseover", highlightCell);
  window.addEventListener("resize", drawLinks);
  startGold(); // gold.js
  loadModels();
}

start();
