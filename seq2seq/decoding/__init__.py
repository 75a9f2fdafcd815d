"""From a trained model to translations, scores and attention maps.

`loading` loads a model to translate with (a checkpoint, an exported folder or a shipped model);
`translator` turns lines into translations through `search` (greedy and beam search), in int8 on
a CPU through `quantize`; `evaluation` translates a test set and scores it with `scores` (BLEU
and chrF), recorded by `model_result`; `attention_maps` and `explain` show what the model attends
to, and `beam_trace` records what the beam search did at each step; `export` writes a model
folder that translates on its own.
"""
