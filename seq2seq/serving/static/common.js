// What every page of the explorer uses: building elements, asking the server, the colour scales
// of a map with their legend, heatmap tables, and plots on axes. Plain JavaScript, loaded before
// each page's own script.
"use strict";

const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";

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

// The text colour that reads on `background` ("rgb(r,g,b)"): black or white, whichever contrasts
// more with it. Their WCAG contrast ratios are (L + 0.05) / 0.05 and 1.05 / (L + 0.05), L the
// background's relative luminance, so the better one is always at least 4.58.
function inkOn(background) {
  const [r, g, b] = background.match(/\d+/g).map((channel) => {
    const c = Number(channel) / 255;
    return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  });
  const luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b;
  return (luminance + 0.05) / 0.05 >= 1.05 / (luminance + 0.05) ? "#000" : "#fff";
}

// `node` on `background`, its text in the colour that reads on it.
function paint(node, background) {
  node.style.background = background;
  node.style.color = inkOn(background);
}

function largest(weights) {
  return Math.max(...weights.map((row) => Math.max(...row)));
}

// The colour scale of a map: a bar from colourOf(low) to colourOf(high) between the two numbers,
// written by `format`.
function legend(colourOf, low, high, format = formatWeight) {
  const bar = element("canvas", { class: "legend-bar", "aria-hidden": "true" });
  bar.width = 64;
  bar.height = 1;
  const context = bar.getContext("2d");
  for (let x = 0; x < bar.width; x++) {
    context.fillStyle = colourOf(low + ((high - low) * x) / (bar.width - 1));
    context.fillRect(x, 0, 1, 1);
  }
  const box = element("span", { class: "legend", "data-min": low, "data-max": high });
  box.append(element("span", { class: "legend-min" }, format(low)), bar,
    element("span", { class: "legend-max" }, format(high)));
  return box;
}

// Show `message` in the page's error box (or the box of id `box`), or hide the box when there
// is none.
function showError(message, box = "error") {
  $(box).textContent = message || "";
  $(box).hidden = !message;
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

// A matrix as a table of coloured cells, rows × columns of `values`; each cell holds its value in
// data-value and shows it with `digits` decimals (none when digits is null), in the text colour
// that reads on its background (inkOn); `title(value, i, j)` is its tooltip.
function heatmapTable(values, options) {
  const { rows, columns, corner = "", colourOf, digits = 2 } = options;
  const title = options.title || ((value) => String(value));
  const table = element("table", { class: "matrix-table" });
  const header = element("tr");
  header.append(element("th", { class: "corner" }, corner));
  columns.forEach((label, j) => header.append(element("th", { "data-col": j }, label)));
  const head = element("thead");
  head.append(header);
  const body = element("tbody");
  values.forEach((row, i) => {
    const tr = element("tr");
    tr.append(element("th", { "data-row": i }, rows[i]));
    row.forEach((value, j) => {
      const cell = element("td", { class: "cell", "data-row": i, "data-col": j,
        "data-value": String(value), title: title(value, i, j) },
        digits === null ? null : value.toFixed(digits));
      paint(cell, colourOf(value));
      tr.append(cell);
    });
    body.append(tr);
  });
  table.append(head, body);
  return table;
}

// Fill `table` with the heatmap of `weights` (rows x columns) labelled by `axes` (mapAxes),
// coloured from 0 to `top`; each cell keeps its weight in data-value.
function drawMapTable(table, weights, axes, top) {
  const { rows, columns, names } = axes;
  const drawn = heatmapTable(weights, { rows, columns, corner: `${names[0]} ↓ / ${names[1]} →`,
    colourOf: (value) => colour(value, top), digits: null,
    title: (value, i, j) => `${rows[i]} → ${columns[j]}: ${value.toFixed(3)}` });
  table.replaceChildren(...drawn.childNodes);
}

// ---- plots on axes, and the diverging scale ---------------------------------------------

// A diverging scale for values in [-1, 1]: blue (-1), white (0), red (+1).
function divergingColour(value) {
  const v = Math.max(-1, Math.min(1, value));
  const end = v < 0 ? [33, 102, 172] : [178, 24, 43];
  const mix = (channel) => Math.round(247 + Math.abs(v) * (channel - 247));
  return `rgb(${mix(end[0])},${mix(end[1])},${mix(end[2])})`;
}

function svgElement(tag, attributes = {}, text = null) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  if (text !== null) node.textContent = text;
  return node;
}

// Up to `count` round tick values from 0 to `last`.
function ticks(last, count) {
  const step = Math.max(1, Math.ceil(last / count / 5) * 5);
  const values = [];
  for (let value = 0; value <= last; value += step) values.push(value);
  return values;
}

// Axes on a plot box: ticks and labels below (x) and on the left (y). `x` and `y` map a value
// to its pixel; xTicks and yTicks are the values that get a tick.
function addAxes(svg, box, axes) {
  const xAxis = svgElement("g", { class: "axis x" });
  const yAxis = svgElement("g", { class: "axis y" });
  const bottom = box.top + box.height;
  xAxis.append(svgElement("line", { x1: box.left, y1: bottom, x2: box.left + box.width, y2: bottom }));
  yAxis.append(svgElement("line", { x1: box.left, y1: box.top, x2: box.left, y2: bottom }));
  for (const value of axes.xTicks) {
    const at = axes.x(value);
    xAxis.append(svgElement("line", { x1: at, y1: bottom, x2: at, y2: bottom + 4 }),
      svgElement("text", { x: at, y: bottom + 15, "text-anchor": "middle", class: "tick" }, value));
  }
  for (const value of axes.yTicks) {
    const at = axes.y(value);
    yAxis.append(svgElement("line", { x1: box.left - 4, y1: at, x2: box.left, y2: at }),
      svgElement("text", { x: box.left - 6, y: at + 4, "text-anchor": "end", class: "tick" }, value));
  }
  xAxis.append(svgElement("text", { x: box.left + box.width / 2, y: bottom + 32,
    "text-anchor": "middle", class: "label" }, axes.xLabel));
  const middle = box.top + box.height / 2;
  yAxis.append(svgElement("text", { x: 12, y: middle, "text-anchor": "middle", class: "label",
    transform: `rotate(-90 12 ${middle})` }, axes.yLabel));
  svg.append(xAxis, yAxis);
}

// PE as a matrix: one cell per position (row) and dimension (column), on axes.
function positionalMatrix(table) {
  const positions = table.length, dims = table[0].length;
  const cellWidth = Math.max(1, Math.min(6, 800 / dims)), cellHeight = 10;
  const box = { left: 50, top: 8, width: dims * cellWidth, height: positions * cellHeight };
  const svg = svgElement("svg", { id: "pe-matrix", role: "img",
    "aria-label": "positional encoding matrix", width: box.left + box.width + 10,
    height: box.top + box.height + 40 });
  table.forEach((row, p) =>
    row.forEach((value, i) =>
      svg.append(svgElement("rect", { x: box.left + i * cellWidth, y: box.top + p * cellHeight,
        width: cellWidth, height: cellHeight, fill: divergingColour(value) })),
    ),
  );
  addAxes(svg, box, {
    x: (i) => box.left + (i + 0.5) * cellWidth,
    y: (p) => box.top + (p + 0.5) * cellHeight,
    xTicks: ticks(dims - 1, 8),
    yTicks: ticks(positions - 1, 5),
    xLabel: "dimension i",
    yLabel: "position p",
  });
  return svg;
}

// ---- the chapters ------------------------------------------------------------------------

// POST `body` to `path` and return the answer's JSON; throws an Error whose message is the
// server's one line (or why there was no answer).
async function ask(path, body) {
  let answer;
  try {
    answer = await fetch(path, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
  } catch (err) {
    throw new Error("error: no answer from the server (" + err.message + ")");
  }
  const payload = await answer.json();
  if (!answer.ok) throw new Error(payload.error || `error: the server answered ${answer.status}`);
  return payload;
}

// Run `work` (an async function that returns a function drawing its answer, or nothing) for the
// newest of a page's requests only: an answer that comes back after a newer request was sent is
// dropped. Shows `status` in #status meanwhile and the server's line in #error (or in the boxes
// of ids `boxes.status` and `boxes.error`).
function newestOnly(work, status = "computing…", boxes = { status: "status", error: "error" }) {
  let latest = 0;
  return async (...args) => {
    const number = ++latest;
    $(boxes.status).textContent = status;
    let error = null;
    let draw = null;
    try {
      draw = await work(...args);
    } catch (err) {
      error = err.message;
    }
    if (number !== latest) return;
    $(boxes.status).textContent = "";
    showError(error, boxes.error);
    if (draw) draw();
  };
}

// The largest absolute value of a matrix: the end of its diverging scale.
function largestMagnitude(values) {
  return Math.max(...values.map((row) => Math.max(...row.map(Math.abs)))) || 1;
}

// A figure: a caption, a colour scale and a heatmap table of `values` in weights' colours (0 to
// their largest) or, with `diverging`, in the diverging scale up to their largest magnitude.
function heatmapFigure(caption, values, options, diverging = false) {
  const top = diverging ? largestMagnitude(values) : largest(values) || 1;
  const colourOf = diverging ? (v) => divergingColour(v / top) : (v) => colour(v, top);
  const figure = element("figure", { class: "matrix" });
  figure.append(element("figcaption", {}, caption),
    legend(colourOf, diverging ? -top : 0, top),
    heatmapTable(values, { colourOf, ...options }));
  return figure;
}

// ["key 0", "key 1", ...]: `count` labels.
function numbered(prefix, count) {
  return Array.from({ length: count }, (_, i) => `${prefix} ${i}`);
}
