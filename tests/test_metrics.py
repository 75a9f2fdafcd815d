"""Corpus scores are sacreBLEU's, on detokenized text."""

import pytest
import sacrebleu

from seq2seq.decoding.scores import corpus_scores
from seq2seq.errors import UserError

HYPOTHESES = ["The cat sat on the mat.", "A dog is running in the park!", "Hello , world"]
REFERENCES = ["The cat sat on a mat.", "A dog runs in the park!", "Hello, world"]


def test_scores_equal_sacrebleu():
    scores = corpus_scores(HYPOTHESES, REFERENCES)
    assert scores.bleu == pytest.approx(sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES]).score)
    assert scores.chrf == pytest.approx(sacrebleu.corpus_chrf(HYPOTHESES, [REFERENCES]).score)
    lowercased = sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES], lowercase=True).score
    assert scores.bleu_lc == pytest.approx(lowercased)
    assert 0 < scores.bleu < 100
    assert scores.bleu_details.startswith("/".join(f"{p:.1f}" for p in _precisions()))
    assert "tok:13a" in scores.signatures["bleu"] and "case:mixed" in scores.signatures["bleu"]
    assert "case:lc" in scores.signatures["bleu_lc"]
    assert scores.signatures["chrf"].startswith("nrefs:1|case:mixed|eff:yes|nc:6|nw:0")


def _precisions() -> list[float]:
    return sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES]).precisions


def test_lowercased_bleu_differs_only_when_case_differs():
    same_case = corpus_scores(HYPOTHESES, REFERENCES)
    assert same_case.bleu_lc == pytest.approx(same_case.bleu)
    shouted = corpus_scores([h.upper() for h in HYPOTHESES], REFERENCES)
    assert shouted.bleu < 5
    assert shouted.bleu_lc == pytest.approx(same_case.bleu)


def test_perfect_and_mismatched_inputs():
    assert corpus_scores(REFERENCES, REFERENCES).bleu == pytest.approx(100.0)
    with pytest.raises(UserError, match="2 hypotheses but 3 references"):
        corpus_scores(HYPOTHESES[:2], REFERENCES)
    with pytest.raises(UserError, match="no sentences"):
        corpus_scores([], [])
