// The masked-softmax chapter: fixed scores, a valid length to change, and the weights that
// POST /v1/chapters/masked_softmax computes with the project's own masked_softmax.
"use strict";

// Three query rows over eight keys (rows: queries, columns: keys).
const SCORES = [
  [2.0, 1.0, 0.5, 3.0, -1.0, 0.0, 1.5, 2.5],
  [0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6],
  [-1.0, 2.0, -1.0, 0.0, 0.5, -2.0, 3.0, 1.0],
];

const update = newestOnly(async () => {
  const validLen = Number($("valid-len").value);
  $("valid-len-shown").textContent = String(validLen);
  const body = { scores: SCORES, valid_lens: SCORES.map(() => validLen) };
  const answer = await ask("/v1/chapters/masked_softmax", body);
  return () => draw(answer.weights, validLen);
});

function draw(weights, validLen) {
  const top = largest(weights) || 1;
  const table = $("heatmap");
  table.replaceChildren();
  const header = element("tr");
  header.append(element("th", { class: "corner" }, "query ↓ / key →"));
  SCORES[0].forEach((_, j) => header.append(element("th", { "data-col": j }, `key ${j}`)));
  const head = element("thead");
  head.append(header);
  const body = element("tbody");
  weights.forEach((row, i) => {
    const tr = element("tr");
    tr.append(element("th", { "data-row": i }, `query ${i}`));
    row.forEach((value, j) => {
      const cell = element("td", { class: "cell wide", "data-row": i, "data-col": j,
        "data-value": String(value) });
      if (j >= validLen) cell.classList.add("masked");
      cell.append(element("span", { class: "score" }, SCORES[i][j].toFixed(1)),
        element("span", { class: "weight" }, value.toFixed(3)));
      cell.style.backgroundColor = colour(value, top); // under the hatching of a masked key
      cell.style.color = inkOn(cell.style.backgroundColor);
      tr.append(cell);
    });
    body.append(tr);
  });
  table.append(head, body);
  $("heatmap-legend").replaceChildren(legend((v) => colour(v, top), 0, top));
  $("chapter").dataset.validLen = String(validLen);
}

$("valid-len").addEventListener("input", update);
update();
