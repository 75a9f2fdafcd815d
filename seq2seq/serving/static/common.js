// What every page of the explorer uses: building elements, and the colour scale of a map with
// its legend. Plain JavaScript, loaded before each page's own script.
"use strict";

const $ = (id) => document.getElementById(id);

function element(tag, attributes = {}, text = null) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  if (text !== null) node.textContent = text;
  return node;
}

// White (0) to dark blue (`top`): a map's colours run from 0 to its largest weight.
function colour(value, top = 1) {
  const v = Math.max(0, Math.min(1, value / top));
  const r = Math.round(255 - v * (255 - 8));
  const g = Math.round(255 - v * (255 - 48));
  const b = Math.round(255 - v * (255 - 107));
  return `rgb(${r},${g},${b})`;
}

function largest(weights) {
  return Math.max(...weights.map((row) => Math.max(...row)));
}

// The colour scale of a map: a bar from colourOf(low) to colourOf(high) between the two numbers.
function legend(colourOf, low, high) {
  const bar = element("canvas", { class: "legend-bar", "aria-hidden": "true" });
  bar.width = 64;
  bar.height = 1;
  const context = bar.getContext("2d");
  for (let x = 0; x < bar.width; x++) {
    context.fillStyle = colourOf(low + ((high - low) * x) / (bar.width - 1));
    context.fillRect(x, 0, 1, 1);
  }
  const box = element("span", { class: "legend", "data-min": low, "data-max": high });
  box.append(element("span", { class: "legend-min" }, formatWeight(low)), bar,
    element("span", { class: "legend-max" }, formatWeight(high)));
  return box;
}

// Show `message` in the page's error box, or hide the box when there is none.
function showError(message) {
  $("error").textContent = message || "";
  $("error").hidden = !message;
}

// Fill `select` with an option per value, labelled by labelOf(value); `chosen` is selected, or
// the first value when it is not among them.
function fillSelect(select, values, labelOf, chosen) {
  select.replaceChildren(...values.map((value) =>
    element("option", { value: String(value) }, labelOf(value))));
  select.value = String(values.map(String).includes(String(chosen)) ? chosen : values[0]);
}

function formatWeight(value) {
  return Number.isInteger(value) ? String(value) : value.toFixed(3);
}

// ---- attention maps: what every page that draws one shares -----------------------------

// The rows and columns of a map of `view` and what they are: cross and Bahdanau maps go from
// output pieces (rows) to source pieces; decoder self-attention is over the decoder's inputs
// (<s> and the pieces before).
function mapAxes(view, source, target) {
  if (view === "encoder_self") return { rows: source, columns: source, names: ["source", "source"] };
  if (view === "decoder_self") {
    const inputs = ["<s>", ...target.slice(0, -1)];
    return { rows: inputs, columns: inputs, names: ["decoder input", "decoder input"] };
  }
  return { rows: target, columns: source, names: ["target", "source"] };
}

function meanOfHeads(heads) {
  return heads[0].map((row, i) =>
    row.map((_, j) => heads.reduce((sum, head) => sum + head[i][j], 0) / heads.length),
  );
}

// Fill `table` with the heatmap of `weights` (rows x columns) labelled by `axes` (mapAxes),
// coloured from 0 to `top`; each cell keeps its weight in data-value.
function drawMapTable(table, weights, axes, top) {
  const { rows, columns, names } = axes;
  table.replaceChildren();
  const head = element("thead");
  const header = element("tr");
  header.append(element("th", { class: "corner" }, `${names[0]} ↓ / ${names[1]} →`));
  columns.forEach((label, j) => header.append(element("th", { "data-col": j }, label)));
  head.append(header);
  const body = element("tbody");
  weights.forEach((row, i) => {
    const tr = element("tr");
    tr.append(element("th", { "data-row": i }, rows[i]));
    row.forEach((value, j) => {
      const cell = element("td", {
        class: "cell",
        "data-row": i,
        "data-col": j,
        "data-value": value.toFixed(4),
        title: `${rows[i]} → ${columns[j]}: ${value.toFixed(3)}`,
      });
      cell.style.background = colour(value, top);
      tr.append(cell);
    });
    body.append(tr);
  });
  table.append(head, body);
}
