// The multi-head chapter: POST /v1/chapters/multi_head runs the project's MultiHeadAttention
// step by step over an input X; the reader changes the number of heads or the input. The page
// only draws.
"use strict";

const LENGTH = 6;
const DIM = 8;

const update = newestOnly(async () => {
  const heads = Number($("heads").value);
  const inputSeed = Number($("input-seed").value);
  const answer = await ask("/v1/chapters/multi_head",
    { length: LENGTH, dim: DIM, heads, input_seed: inputSeed });
  return () => draw(answer, heads, inputSeed);
});

function draw(answer, heads, inputSeed) {
  const positions = numbered("position", LENGTH);
  const size = DIM / heads;
  const dims = (count) => Array.from({ length: count }, (_, j) => String(j));
  $("inputs").replaceChildren(heatmapFigure("X", answer.inputs,
    { rows: positions, columns: dims(DIM), corner: "position ↓ / dimension →" }, true));
  const figures = [];
  for (let h = 0; h < heads; h++) {
    figures.push(heatmapFigure(`head ${h}: queries Q W_q^${h} (d = ${size})`, answer.queries[h],
      { rows: positions, columns: dims(size), corner: "position ↓ / dimension →" }, true));
    const weights = heatmapFigure(`head ${h}: weights`, answer.weights[h],
      { rows: positions, columns: positions, corner: "query ↓ / key →" });
    weights.querySelector("table").classList.add("head-weights");
    weights.dataset.head = String(h);
    figures.push(weights);
  }
  $("heads-shown").replaceChildren(...figures);
  const headOf = (j) => `h${Math.floor(j / size)}·${j % size}`;
  const merged = heatmapFigure("concat(head_1, …, head_H)", answer.merged,
    { rows: positions, columns: dims(DIM).map((_, j) => headOf(j)),
      corner: "position ↓ / head·dim →" }, true);
  merged.querySelector("table").id = "merged-table";
  const output = heatmapFigure("output: concat(…) W_o", answer.output,
    { rows: positions, columns: dims(DIM), corner: "position ↓ / dimension →" }, true);
  output.querySelector("table").id = "output-table";
  $("merged").replaceChildren(merged, output);
  $("chapter").dataset.shown = `${heads} ${inputSeed}`;
}

$("heads").addEventListener("change", update);
$("input-seed").addEventListener("change", update);
update();
