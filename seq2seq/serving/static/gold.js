// Attention against human gold: a pasted gold line for the pair shown (the source sentence and
// the chosen translation, or the target typed) is scored by POST /v1/align with grid, which
// answers the gold's links and the AER of every head, every layer's mean and the mean of all; a
// gold file the server was started with (seq2seq explore --gold PAIRS GOLD) is scored by POST
// /v1/align/gold. Plain JavaScript, loaded after common.js; explorer.js calls goldChanged() once
// per answer and markGold() for each cell of a map.
"use strict";

const GOLD_BOXES = { status: "gold-status", error: "gold-error" };
const FILE_BOXES = { status: "file-status", error: "file-error" };

// The gold links of the pair shown, as sets of "target word-source word" (from 0), or null.
let goldShown = null;

// "i-j i-j": Pharaoh links from 0 (source i, target j) as a set of "j-i" keys, the order of the
// map's rows and columns.
function linkKeys(pharaoh) {
  return new Set(pharaoh.split(" ").filter(Boolean).map((link) => link.split("-").reverse().join("-")));
}

const scoreGold = newestOnly(async () => {
  const line = $("gold").value.trim();
  if (!line || !state.payload) return () => setGold(null, null);
  const shown = hypothesis(); // explorer.js: the model's translation, or the target typed
  const body = {
    model: state.payload.model,
    pairs: [{ source: state.payload.sentences[state.sentence], target: shown.text, gold: line }],
    grid: true,
  };
  let answer;
  try {
    answer = await ask("/v1/align", body); // common.js
  } catch (err) {
    setGold(null, null); // a bad line: nothing of an older one stays drawn
    throw err;
  }
  return () => setGold(answer.alignments[0].gold, answer.scores);
}, "scoring…", GOLD_BOXES);

function setGold(gold, scores) {
  goldShown = gold && { sure: linkKeys(gold.sure), possible: linkKeys(gold.possible) };
  drawAerGrid($("gold-grid"), scores, `Gold line, the source and ${pairShown()}`); // explorer.js
  if (!state.payload) return;
  drawHeatmap(); // explorer.js: the map, with the gold's links marked
  drawLinks(); // and the word alignment
}

// A new answer of /v1/explain: the gold's words may have changed, so score it again.
function goldChanged() {
  goldShown = null;
  if ($("gold").value.trim()) scoreGold();
  else setGold(null, null);
}

// The gold's links as [target word, source word, "gold-sure" or "gold-possible"].
function goldLinks() {
  if (!goldShown) return [];
  const links = (keys, kind) => [...keys].map((key) => [...key.split("-").map(Number), kind]);
  return [...links(goldShown.sure, "gold-sure"), ...links(goldShown.possible, "gold-possible")];
}

// The gold's mark of a map cell of target word u and source word v: "gold-sure", "gold-possible"
// or null.
function goldMark(u, v) {
  if (!goldShown) return null;
  if (goldShown.sure.has(`${u}-${v}`)) return "gold-sure";
  return goldShown.possible.has(`${u}-${v}`) ? "gold-possible" : null;
}

const scoreGoldFile = newestOnly(async () => {
  const body = { model: $("model").value, swap: $("gold-swap").checked };
  const answer = await ask("/v1/align/gold", body);
  const caption = `Gold file ${answer.file}: ${answer.pairs} pairs, ${answer.model}`;
  return () => drawAerGrid($("file-grid"), answer.scores, caption);
}, "scoring every pair of the gold file…", FILE_BOXES);

// ---- the grid of AER: a row per layer, a column per head and the layer's mean ----------------

// The scores of /v1/align's grid ({"head:L.H": score, "layer:L": score, "mean": score}) as a
// table: cell (L, H) for each head, a last column for each layer's mean, a last row for the
// mean of all (the explorer's rule); the head of lowest AER is marked "best". Clicking a head or
// a layer's mean shows its map above.
function drawAerGrid(container, scores, caption) {
  container.replaceChildren();
  if (!scores) return;
  const layers = Object.keys(scores).filter((rule) => rule.startsWith("layer:")).length;
  const heads = Object.keys(scores).filter((rule) => rule.startsWith("head:0.")).length;
  const headRules = Object.keys(scores).filter((rule) => rule.startsWith("head:"));
  const best = headRules.reduce((a, b) => (scores[b].aer < scores[a].aer ? b : a), headRules[0]);
  // Colours from white (the highest AER of the grid) to dark blue (the lowest)
  const aers = Object.values(scores).map((score) => score.aer);
  const [low, high] = [Math.min(...aers), Math.max(...aers)];
  const colourOf = (aer) => colour(high - aer, high - low || 1);
  const table = element("table", { class: "aer-grid" });
  const title = element("caption", {}, `${caption}: AER in percent, lower is closer to the gold `);
  title.append(legend(colourOf, low, high, (aer) => aer.toFixed(1))); // common.js: as the cells
  table.append(title);
  if (layers) { // the GRU has one map: the mean alone
    const header = element("tr");
    header.append(element("th"), ...[...Array(heads).keys()].map((h) => element("th", {}, `head ${h + 1}`)),
      element("th", {}, "mean of heads"));
    table.append(header);
  }
  for (let layer = 0; layer < layers; layer++) {
    const row = element("tr");
    row.append(element("th", {}, `layer ${layer + 1}`));
    for (let head = 0; head < heads; head++) {
      row.append(aerCell(scores, `head:${layer}.${head}`, best, colourOf));
    }
    row.append(aerCell(scores, `layer:${layer}`, best, colourOf));
    table.append(row);
  }
  const all = element("tr");
  all.append(element("th", {}, "mean of all"), aerCell(scores, "mean", best, colourOf));
  all.lastChild.colSpan = heads + 1;
  table.append(all);
  container.append(table);
}

// One cell of the grid: the AER of `rule` in colourOf(AER); its tooltip gives precision, recall
// and the rule's name for seq2seq align --rule.
function aerCell(scores, rule, best, colourOf) {
  const score = scores[rule];
  const cell = element("td", { class: "aer", "data-rule": rule, "data-aer": score.aer,
    title: `--rule ${rule}: AER ${score.aer}, precision ${score.precision}, recall ${score.recall}` },
    score.aer.toFixed(1));
  paint(cell, colourOf(score.aer));
  if (rule === best) cell.classList.add("best");
  const found = rule.match(/^(?:head|layer):(\d+)(?:\.(\d+))?$/);
  if (found) {
    cell.addEventListener("click", () => showRule(Number(found[1]), found[2] === undefined ? "mean" : Number(found[2])));
  }
  return cell;
}

// Show the cross-attention of `layer` and `head` ("mean": the layer's mean) in the map above.
function showRule(layer, head) {
  if (!state.payload || !("cross" in hypothesis().maps)) return;
  Object.assign(state, { view: "cross", layer, head });
  renderMap(); // explorer.js
  $("heatmap").scrollIntoView({ block: "center" });
}

function startGold() {
  let timer = null;
  $("gold").addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(scoreGold, DEBOUNCE_MS);
  });
  $("gold-file").addEventListener("click", scoreGoldFile);
}
