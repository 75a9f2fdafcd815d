"""An `EvalResult` made by hand, for the tests of what `seq2seq evaluate --record` writes."""

from seq2seq.decoding.evaluation import EvalResult

SCORES = {"bleu": 1.0, "bleu_lc": 2.0, "chrf": 3.0, "signatures": {"bleu": "b"}}


def eval_result(sentences: int, **fields: object) -> EvalResult:
    """A result of `sentences` sentences at one a second, beam 5, fp32, with the number guard
    and segmentation, the SCORES above, and `fields` (e.g. copy_accuracy) on top."""
    return EvalResult(
        **SCORES,
        bleu_details="",
        sentences=sentences,
        seconds=1.0,
        sentences_per_second=float(sentences),
        device="cpu",
        precision="fp32",
        beam_size=5,
        keep_numbers=True,
        split_sentences=True,
        hypotheses=[],
        hypothesis_ids=[],
        **fields,
    )
