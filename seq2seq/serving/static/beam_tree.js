// The beam search as a tree: draws the `beam_tree` of a /v1/explain answer
// (seq2seq.decoding.explain.beam_tree). Steps run left to right; at each step every live beam
// (a box) lists the pieces it proposes, most probable first, with their log-probabilities.
// Clicking a piece shows the attention row of the beam that proposed it. Plain JavaScript,
// loaded after common.js; explorer.js asks treeWanted() for each request and calls
// drawBeamTree once per answer.
"use strict";

const TREE = {
  nodeWidth: 150, // one candidate: its piece and log-probability
  rowHeight: 18,
  columnGap: 36, // room for the edges between steps
  groupGap: 10, // between the beams of a step
  top: 24, // below the step numbers
};

function candidateKey(step, beam, candidate) {
  return `${step}:${beam}:${candidate}`;
}

// The fate of candidate `c` of a traced beam: "finished", "kept" or "pruned".
function fate(beam, c) {
  if (beam.finished[c]) return "finished";
  return beam.next_beam[c] >= 0 ? "kept" : "pruned";
}

// The keys of the candidates on the paths of the n-best hypotheses: from where each ended, back
// through the (beam, candidate) each beam continues.
function bestPaths(tree) {
  const onPath = new Set();
  for (const hypothesis of tree.finished.slice(0, tree.nbest)) {
    let step = hypothesis.step, beam = hypothesis.beam, candidate = hypothesis.candidate;
    while (step >= 0) {
      onPath.add(candidateKey(step, beam, candidate));
      const parent = tree.steps[step].beams.find((b) => b.beam === beam).parent;
      if (parent === null) break;
      [beam, candidate] = parent;
      step -= 1;
    }
  }
  return onPath;
}

function finishedEntry(tree, step, beam, candidate) {
  const index = tree.finished.findIndex(
    (f) => f.step === step && f.beam === beam && f.candidate === candidate);
  return [index, tree.finished[index]];
}

function nodeLabel(tree, step, beam, c) {
  const piece = beam.pieces[c];
  if (!beam.finished[c]) return `${piece} ${beam.log_probs[c].toFixed(2)}`;
  const [, hypothesis] = finishedEntry(tree, step, beam.beam, c);
  return `${piece} ${beam.log_probs[c].toFixed(2)} → ${hypothesis.score.toFixed(3)}`;
}

// One candidate node: a rectangle and its label, styled by its fate, with its numbers as data.
function candidateNode(tree, step, beam, c, x, y, onPath) {
  const kind = fate(beam, c);
  const group = svgElement("g", {
    class: `tree-node ${kind}` + (onPath.has(candidateKey(step, beam.beam, c)) ? " best" : ""),
    "data-step": step,
    "data-beam": beam.beam,
    "data-candidate": c,
    "data-token": beam.tokens[c],
    "data-log-prob": beam.log_probs[c],
    "data-score": beam.scores[c],
    "data-fate": kind,
    tabindex: 0,
  });
  group.append(
    svgElement("rect", { x: x, y: y, width: TREE.nodeWidth, height: TREE.rowHeight - 2, rx: 3 }),
    svgElement("text", { x: x + 5, y: y + TREE.rowHeight - 6 }, nodeLabel(tree, step, beam, c)),
    svgElement("title", {}, `${beam.pieces[c]} (id ${beam.tokens[c]}): log p ${beam.log_probs[c]}` +
      `, score ${beam.scores[c]}, ${kind}`));
  return group;
}

// Whether the page asks /v1/explain for the tree: only while its section is open, so that the
// answer stays small and quick for whoever does not look at it.
function treeWanted() {
  return $("beam-tree-section").open;
}

// Opening the section asks for the tree of the sentence shown (explorer.js `explain`).
$("beam-tree-section").addEventListener("toggle", () => {
  if (treeWanted() && state.payload && !state.payload.beam_tree) explain(state.shown, state.chosen);
});

function drawBeamTree(payload) {
  const tree = payload.beam_tree;
  const svg = $("beam-tree");
  svg.replaceChildren();
  for (const id of ["tree-rule", "tree-finished", "tree-attention", "tree-legend"]) {
    $(id).replaceChildren();
  }
  $("tree-detail").hidden = true;
  if (!tree) return;
  const onPath = bestPaths(tree);
  const column = TREE.nodeWidth + TREE.columnGap;
  const places = new Map(); // candidate key -> its node's right edge and middle
  const root = svgElement("g", { class: "tree-node root" });
  root.append(svgElement("rect", { x: 4, y: TREE.top, width: 40, height: TREE.rowHeight - 2, rx: 3 }),
    svgElement("text", { x: 10, y: TREE.top + TREE.rowHeight - 6 }, "<s>"));
  svg.append(root);
  let height = 0;
  tree.steps.forEach((step, number) => {
    const x = 50 + TREE.columnGap + number * column;
    let y = TREE.top;
    svg.append(svgElement("text", { class: "tree-step", x: x, y: 14 }, `step ${number + 1}`));
    for (const beam of step.beams) {
      const boxHeight = beam.tokens.length * TREE.rowHeight + 4;
      svg.append(svgElement("rect", { class: "tree-beam", x: x - 3, y: y - 2,
        width: TREE.nodeWidth + 6, height: boxHeight, rx: 4, "data-step": number,
        "data-beam": beam.beam }));
      const [fromX, fromY] = beam.parent === null ? [44, TREE.top + TREE.rowHeight / 2]
        : places.get(candidateKey(number - 1, ...beam.parent));
      const best = beam.parent === null || onPath.has(candidateKey(number - 1, ...beam.parent));
      svg.append(svgElement("path", { class: "tree-edge" + (best ? " best" : ""),
        d: `M${fromX},${fromY} C${fromX + 20},${fromY} ${x - 23},${y + 8} ${x - 3},${y + 8}` }));
      beam.tokens.forEach((_, c) => {
        svg.append(candidateNode(tree, number, beam, c, x, y, onPath));
        places.set(candidateKey(number, beam.beam, c), [x + TREE.nodeWidth, y + TREE.rowHeight / 2]);
        y += TREE.rowHeight;
      });
      y += TREE.groupGap;
    }
    height = Math.max(height, y);
  });
  svg.setAttribute("width", 50 + TREE.columnGap + tree.steps.length * column);
  svg.setAttribute("height", height);
  svg.onclick = (event) => showCandidate(payload, event.target.closest("g.tree-node"));
  svg.onkeydown = (event) => event.key === "Enter" && showCandidate(payload, event.target.closest("g.tree-node"));
  $("tree-rule").textContent = `Beam ${tree.beam}: each step, every beam (a box) proposes its ` +
    `${2 * tree.beam} most probable next pieces with log p; score = the beam's score + log p. ` +
    `The ${tree.beam} best by score that do not end become the next beams (blue); a </s> ` +
    `among the ${tree.beam} best ends a hypothesis (green), scored raw / lp(n), ` +
    `lp(n) = ((5 + n) / 6)^${tree.length_penalty}; the others are pruned (grey). ` +
    `Orange: the paths of the ${tree.nbest}-best.`;
  drawFinished(tree);
  showCandidate(payload, null);
}

function drawFinished(tree) {
  const list = $("tree-finished");
  list.replaceChildren();
  tree.finished.forEach((hypothesis, i) => {
    const item = element("li", { "data-index": i }, hypothesis.text);
    if (i < tree.nbest) item.classList.add("best");
    item.append(element("span", { class: "score" },
      `step ${hypothesis.step + 1}: ${hypothesis.raw_score.toFixed(4)} / ` +
      `${hypothesis.penalty.toFixed(4)} = ${hypothesis.score.toFixed(4)}`));
    list.append(item);
  });
}

// The attention row that produced candidate `node`'s distribution: its beam's cross-attention at
// its step, over the source pieces.
function showCandidate(payload, node) {
  const detail = $("tree-detail");
  if (!node || node.classList.contains("root")) {
    detail.hidden = true;
    return;
  }
  const tree = payload.beam_tree;
  for (const chosen of $("beam-tree").querySelectorAll(".chosen")) chosen.classList.remove("chosen");
  node.classList.add("chosen");
  const step = Number(node.dataset.step), c = Number(node.dataset.candidate);
  const beam = tree.steps[step].beams.find((b) => b.beam === Number(node.dataset.beam));
  const kind = fate(beam, c);
  let outcome = kind === "kept" ? `kept as beam ${beam.next_beam[c]} of step ${step + 2}` : kind;
  if (kind === "kept" && step === tree.steps.length - 1) outcome += ", where the search stops";
  if (kind === "finished") {
    const [, hypothesis] = finishedEntry(tree, step, beam.beam, c);
    outcome += `: ${hypothesis.raw_score.toFixed(4)} / lp(${step + 1}) ` +
      `${hypothesis.penalty.toFixed(4)} = ${hypothesis.score.toFixed(4)}`;
  }
  $("tree-node").textContent = `Step ${step + 1}, beam ${beam.beam} (score ` +
    `${beam.score.toFixed(4)}) proposes ${beam.pieces[c]}: log p ${beam.log_probs[c].toFixed(4)}, ` +
    `score ${beam.scores[c].toFixed(4)}, ${outcome}. The attention row that produced it ` +
    `(${tree.attention}):`;
  const row = beam.attention;
  const top = Math.max(...row) || 1;
  const pieces = $("tree-attention");
  pieces.replaceChildren(...payload.source.pieces.map((piece, j) => {
    const chip = element("span", { class: "piece", "data-index": j, "data-value": row[j],
      title: `${piece}: ${row[j].toFixed(3)}` }, piece);
    paint(chip, colour(row[j], top));
    return chip;
  }));
  $("tree-legend").replaceChildren(legend((v) => colour(v, top), 0, top));
  detail.hidden = false;
}
