// The self-attention chapter: POST /v1/chapters/self_attention gives a served Transformer's
// first encoder layer's self-attention over the sentence typed, with and without the positional
// encoding, and the encodings. The page only draws.
"use strict";

const DEBOUNCE_MS = 250;
const chapter = { answer: null, timer: null };

const update = newestOnly(async () => {
  const body = { model: $("model").value || null, text: $("text").value };
  const answer = await ask("/v1/chapters/self_attention", body);
  return () => {
    chapter.answer = answer;
    if (!$("model").value) fillSelect($("model"), answer.models, (name) => name, answer.model);
    const heads = answer.with_pe.map((_, h) => h);
    fillSelect($("head"), heads, (h) => `head ${h}`, $("head").value);
    draw();
    $("chapter").dataset.text = body.text;
  };
});

function draw() {
  const answer = chapter.answer;
  const head = Number($("head").value);
  const grid = { rows: answer.pieces, columns: answer.pieces, corner: "query ↓ / key →",
    digits: null };
  const withPe = heatmapFigure("with the positional encoding (what the model computes)",
    answer.with_pe[head], grid);
  withPe.querySelector("table").id = "with-pe";
  const withoutPe = heatmapFigure("without it: copies of a word attend alike",
    answer.without_pe[head], grid);
  withoutPe.querySelector("table").id = "without-pe";
  $("maps").replaceChildren(withPe, withoutPe);
  $("positional").replaceChildren(positionalMatrix(answer.positional),
    legend(divergingColour, -1, 1));
  $("chapter").dataset.head = String(head);
}

function schedule() {
  clearTimeout(chapter.timer);
  chapter.timer = setTimeout(update, DEBOUNCE_MS);
}

$("text").addEventListener("input", schedule);
$("model").addEventListener("change", update);
$("head").addEventListener("change", draw);
update();
