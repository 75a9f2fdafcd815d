// The scoring chapter: the same queries and keys through the project's AdditiveAttention and
// DotProductAttention (POST /v1/chapters/scoring); the reader scales the queries or changes
// the additive weights' seed. The page only draws.
"use strict";

// Three queries and five keys of d = 2 numbers (rows: vectors).
const QUERIES = [
  [1.0, 0.5],
  [-0.5, 1.0],
  [0.8, -0.8],
];
const KEYS = [
  [1.0, 0.0],
  [0.7, 0.7],
  [0.0, 1.0],
  [-0.7, 0.7],
  [0.3, -1.0],
];

const update = newestOnly(async () => {
  const scale = Number($("scale").value);
  const seed = Number($("seed").value);
  $("scale-shown").textContent = scale.toFixed(2);
  const queries = QUERIES.map((row) => row.map((value) => value * scale));
  const answer = await ask("/v1/chapters/scoring", { queries, keys: KEYS, seed });
  return () => draw(queries, answer, scale, seed);
});

function draw(queries, answer, scale, seed) {
  const grid = { rows: numbered("query", QUERIES.length), columns: numbered("key", KEYS.length),
    corner: "query ↓ / key →" };
  const coordinates = ["1", "2"];
  $("vectors").replaceChildren(
    heatmapFigure("queries q (scaled)", queries,
      { rows: grid.rows, columns: coordinates, corner: "query ↓ / coordinate →" }, true),
    heatmapFigure("keys k", KEYS,
      { rows: grid.columns, columns: coordinates, corner: "key ↓ / coordinate →" }, true));
  for (const [id, name] of [["additive", "additive"], ["dot-product", "dot_product"]]) {
    $(id).replaceChildren(
      heatmapFigure("scores", answer[name].scores, grid, true),
      heatmapFigure("weights", answer[name].weights, grid));
    $(id).querySelectorAll("table")[0].id = `${id}-scores`;
    $(id).querySelectorAll("table")[1].id = `${id}-weights`;
  }
  $("chapter").dataset.shown = `${scale} ${seed}`;
}

$("scale").addEventListener("input", update);
$("seed").addEventListener("change", update);
update();
