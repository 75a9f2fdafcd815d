"""Corpus scores with sacreBLEU, the reference implementation, on detokenized text.

BLEU and chrF are computed on plain text exactly as sacreBLEU does (its own 13a tokenizer for
BLEU, characters for chrF), so numbers are comparable across papers and tools. Each score comes
with its signature, which says how it was computed (e.g. `nrefs:1|case:mixed|eff:no|tok:13a|
smooth:exp|version:2.6.0`): quote the signature with the number.
"""

from dataclasses import dataclass

from sacrebleu.metrics import BLEU, CHRF

from seq2seq.errors import UserError


@dataclass
class Scores:
    """bleu: cased BLEU (0-100); bleu_lc: BLEU after lowercasing both sides; chrf: chrF (0-100).

    bleu_details: n-gram precisions, brevity penalty and lengths, as sacreBLEU prints them.
    signatures: {"bleu": ..., "bleu_lc": ..., "chrf": ...} sacreBLEU signature strings.
    """

    bleu: float
    bleu_lc: float
    chrf: float
    bleu_details: str
    signatures: dict[str, str]


def corpus_scores(hypotheses: list[str], references: list[str]) -> Scores:
    """Score detokenized hypotheses against one detokenized reference per sentence."""
    if len(hypotheses) != len(references):
        raise UserError(
            f"{len(hypotheses)} hypotheses but {len(references)} references: "
            "the files must have one line per sentence each"
        )
    if not references:
        raise UserError("nothing to score: no sentences")
    metrics = {"bleu": BLEU(), "bleu_lc": BLEU(lowercase=True), "chrf": CHRF()}
    results = {name: m.corpus_score(hypotheses, [references]) for name, m in metrics.items()}
    bleu = results["bleu"]
    precisions = "/".join(f"{p:.1f}" for p in bleu.precisions)
    return Scores(
        bleu=bleu.score,
        bleu_lc=results["bleu_lc"].score,
        chrf=results["chrf"].score,
        bleu_details=f"{precisions} (BP = {bleu.bp:.3f} ratio = {bleu.ratio:.3f} "
        f"hyp_len = {bleu.sys_len} ref_len = {bleu.ref_len})",
        signatures={name: str(m.get_signature()) for name, m in metrics.items()},
    )
