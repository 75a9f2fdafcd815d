// The Nadaraya-Watson chapter: the example's data and learned kernel width (POST
// /v1/chapters/nadaraya_watson/fit), the pooled curves of both widths, and the kernel weights of
// a query the reader drags (POST /v1/chapters/nadaraya_watson). The page only draws.
"use strict";

const X_MAX = 5; // the data lie in [0, 5)
const FIT_BOX = { left: 50, top: 10, width: 640, height: 240 };
const WEIGHTS_BOX = { left: 50, top: 10, width: 640, height: 120 };
const COLOURS = { fixed: "#1c7ed6", learned: "#c92a2a" };

const chapter = { fit: null, curves: null }; // the fit drawn, and its pooled curves

const xPixel = (box) => (x) => box.left + (x / X_MAX) * box.width;

function plot(id, box) {
  return svgElement("svg", { id, class: "plot", viewBox: `0 0 ${box.left + box.width + 20} ` +
    `${box.top + box.height + 40}`, width: box.left + box.width + 20 });
}

// The widths compared: w = 1 and the learned one.
function widths() {
  return [1, chapter.fit.w];
}

const loadFit = newestOnly(async () => {
  const seed = Number($("seed").value);
  const fit = await ask("/v1/chapters/nadaraya_watson/fit", { seed });
  const curves = await ask("/v1/chapters/nadaraya_watson", {
    keys: fit.x_train, values: fit.y_train, queries: fit.x_test, widths: [1, fit.w],
  });
  return () => {
    Object.assign(chapter, { fit, curves });
    $("chapter").dataset.seed = String(seed);
    const losses = fit.losses;
    $("fit-summary").textContent = `${fit.x_train.length} noisy training points; learned ` +
      `w = ${fit.w.toFixed(3)} (leave-one-out loss ${losses[0].toFixed(3)} → ` +
      `${losses[losses.length - 1].toFixed(3)} in ${losses.length} steps).`;
    drawFit();
    poolQuery();
  };
});

const poolQuery = newestOnly(async () => {
  if (!chapter.fit) return null;
  const query = Number($("query").value);
  $("query-shown").textContent = query.toFixed(2);
  const fit = chapter.fit;
  const pooled = await ask("/v1/chapters/nadaraya_watson", {
    keys: fit.x_train, values: fit.y_train, queries: [query], widths: widths(),
  });
  return () => drawQuery(query, pooled);
});

function yRange(fit) {
  const all = [...fit.y_train, ...fit.y_test];
  return [Math.floor(Math.min(...all)), Math.ceil(Math.max(...all))];
}

function drawFit() {
  const { fit, curves } = chapter;
  const [low, high] = yRange(fit);
  const x = xPixel(FIT_BOX);
  const y = (v) => FIT_BOX.top + ((high - v) / (high - low)) * FIT_BOX.height;
  const svg = plot("fit", FIT_BOX);
  addAxes(svg, FIT_BOX, { x, y, xTicks: [0, 1, 2, 3, 4, 5], xLabel: "x", yLabel: "y",
    yTicks: Array.from({ length: high - low + 1 }, (_, i) => low + i) });
  const line = (xs, ys, attributes) => svgElement("polyline", { fill: "none",
    points: xs.map((value, i) => `${x(value)},${y(ys[i])}`).join(" "), ...attributes });
  svg.append(line(fit.x_test, fit.y_test, { stroke: "#1d2430", "stroke-width": 1.5 }));
  fit.x_train.forEach((value, i) => svg.append(svgElement("circle", { class: "train-point",
    cx: x(value), cy: y(fit.y_train[i]), r: 3, fill: "#868e96" })));
  ["fixed", "learned"].forEach((name, n) => svg.append(line(fit.x_test, curves.pooled[n], {
    id: `curve-${name}`, stroke: COLOURS[name], "stroke-width": 2,
    "data-values": JSON.stringify(curves.pooled[n]) })));
  svg.append(svgElement("line", { id: "query-line", y1: FIT_BOX.top,
    y2: FIT_BOX.top + FIT_BOX.height }));
  ["fixed", "learned"].forEach((name) => svg.append(svgElement("circle", {
    id: `pooled-${name}`, r: 5, fill: COLOURS[name], stroke: "#fff" })));
  svg.addEventListener("pointerdown", (event) => {
    svg.setPointerCapture(event.pointerId);
    dragTo(svg, event);
  });
  svg.addEventListener("pointermove", (event) => {
    if (svg.hasPointerCapture(event.pointerId)) dragTo(svg, event);
  });
  $("fit-plot").replaceChildren(svg);
  chapter.y = y;
}

// Move the query to where the pointer is over the plot.
function dragTo(svg, event) {
  const rect = svg.getBoundingClientRect();
  const scale = svg.viewBox.baseVal.width / rect.width;
  const pixel = (event.clientX - rect.left) * scale;
  const query = ((pixel - FIT_BOX.left) / FIT_BOX.width) * X_MAX;
  $("query").value = String(Math.max(0, Math.min(Number($("query").max), query)));
  poolQuery();
}

function drawQuery(query, pooled) {
  const x = xPixel(FIT_BOX)(query);
  $("query-line").setAttribute("x1", x);
  $("query-line").setAttribute("x2", x);
  ["fixed", "learned"].forEach((name, n) => {
    $(`pooled-${name}`).setAttribute("cx", x);
    $(`pooled-${name}`).setAttribute("cy", chapter.y(pooled.pooled[n][0]));
  });
  drawWeights(pooled.weights.map((rows) => rows[0]));
  const [fixed, learned] = pooled.pooled.map((values) => values[0]);
  $("pooled").textContent = `f(${query.toFixed(2)}) = ${fixed.toFixed(3)} with w = 1, ` +
    `${learned.toFixed(3)} with the learned w = ${chapter.fit.w.toFixed(3)}`;
  $("pooled").dataset.values = JSON.stringify([fixed, learned]);
  $("chapter").dataset.query = String(query);
}

// Bars of each width's weights over the training inputs x_i: fixed on the left of x_i, learned
// on its right.
function drawWeights(weights) {
  const keys = chapter.fit.x_train;
  const top = Math.max(...weights.flat());
  const x = xPixel(WEIGHTS_BOX);
  const y = (v) => WEIGHTS_BOX.top + (1 - v / top) * WEIGHTS_BOX.height;
  const svg = plot("weights", WEIGHTS_BOX);
  addAxes(svg, WEIGHTS_BOX, { x, y, xTicks: [0, 1, 2, 3, 4, 5], yTicks: [0],
    xLabel: "training input x_i", yLabel: "weight" });
  svg.append(svgElement("text", { x: WEIGHTS_BOX.left + 4, y: WEIGHTS_BOX.top + 10,
    class: "tick" }, `largest ${top.toFixed(3)}`));
  ["fixed", "learned"].forEach((name, n) => weights[n].forEach((value, i) => svg.append(
    svgElement("rect", { class: `weight ${name}`, "data-value": String(value),
      x: x(keys[i]) - (n === 0 ? 3 : 0), width: 3, y: y(value),
      height: WEIGHTS_BOX.top + WEIGHTS_BOX.height - y(value), fill: COLOURS[name] }))));
  $("weights-plot").replaceChildren(svg);
}

$("seed").addEventListener("change", loadFit);
$("query").addEventListener("input", poolQuery);
loadFit();
