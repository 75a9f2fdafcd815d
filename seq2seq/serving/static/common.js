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

function formatWeight(value) {
  return Number.isInteger(value) ? String(value) : value.toFixed(3);
}
