"""What a beam search did at each step, kept for the explorer's beam tree.

`beam_search(..., trace=BeamTrace())` decodes one sentence and adds one `TraceStep` per step:
every live beam's C most probable next tokens (C = min(2K, V), K = beam size), which of them
became the next step's beams, which ended as finished hypotheses, the length penalty of that
step, and the cross-attention row each beam read to compute its next-token distribution.

The search ranks the K * V (beam, token) continuations by the sum of the beam's score and the
token's log-probability and keeps the 2K best: each of those is among its beam's C most probable
tokens, so every continuation the search kept or finished is a candidate here; the other
candidates are the pruned ones. A finished hypothesis of n tokens (EOS counted) scores
raw / lp(n) (`seq2seq.decoding.line_translator.gnmt_penalty`). Nothing here changes the search:
it only reads tensors the search computed, and costs nothing when no trace is given.
"""

from dataclasses import dataclass, field

import torch
from torch import Tensor

from seq2seq.data.specials import EOS_ID


@dataclass
class TraceStep:
    """One step of a traced beam search (one sentence). K = beam size, C = candidates per beam,
    S = source length (EOS included).

    beam_scores: (K,) each beam's score before the step, the sum of its tokens' log-probabilities
        (-inf where there is no beam: at the first step only beam 0 is live).
    parents: (K, 2) the (beam, candidate) of the previous step each beam continues; -1 at the
        first step.
    tokens: (K, C) each beam's C most probable next tokens, most probable first.
    log_probs: (K, C) their log-probabilities (-inf: banned, e.g. all but EOS at the last step).
    scores: (K, C) beam_scores + log_probs: what the search ranks the continuations by.
    next_beam: (K, C) the beam of the next step a candidate became, -1 for the others.
    finished: (K, C) True where the candidate ended (EOS among the K best) as a hypothesis.
    penalty: lp(step + 1), the GNMT length penalty of a hypothesis that ends at this step.
    attention: (K, S) each beam's cross-attention at this step, averaged over heads (the layer
        `decode_step` returns: the last decoder layer, or `model.attention_layer`).
    """

    beam_scores: Tensor
    parents: Tensor
    tokens: Tensor
    log_probs: Tensor
    scores: Tensor
    next_beam: Tensor
    finished: Tensor
    penalty: float
    attention: Tensor

    def final_scores(self) -> Tensor:
        """(K, C) the length-penalised score scores / penalty of each candidate, as the search
        computes it for the ones that end."""
        return self.scores / self.penalty


@dataclass
class Finished:
    """A hypothesis the search set aside: it ended at `step` as candidate `candidate` of beam
    `beam`. tokens: its output ids (no EOS); raw_score: the sum of its log-probabilities (EOS
    included); score: raw_score / penalty."""

    step: int
    beam: int
    candidate: int
    tokens: list[int]
    raw_score: float
    penalty: float
    score: float


@dataclass
class BeamTrace:
    """The steps of one beam search, filled by `seq2seq.decoding.search.beam_search`."""

    steps: list[TraceStep] = field(default_factory=list)

    def add_step(
        self,
        beam_scores: Tensor,
        log_probs: Tensor,
        attention: Tensor,
        next_beams: Tensor,
        next_tokens: Tensor,
        ended_beams: Tensor,
        penalty: float,
    ) -> None:
        """Record one step of a one-sentence search.

        beam_scores: (1, K) before the step; log_probs: (K, V) after the bans; attention:
        (K, H, S); next_beams, next_tokens: (1, K) the (beam, token) each next beam continues;
        ended_beams: (E,) the beams whose EOS candidate ended as a hypothesis.
        """
        k = beam_scores.shape[1]
        beam_scores = beam_scores[0].float()
        log_probs, tokens = log_probs.float().topk(min(2 * k, log_probs.shape[1]), dim=1)
        scores = beam_scores[:, None] + log_probs  # (K, C), the sum the search ranks by
        # The candidate each next beam continues (a beam of score -inf only fills the K rows).
        continued = tokens[next_beams[0]] == next_tokens[0][:, None]  # (K, C)
        beams, candidates = continued.nonzero(as_tuple=True)  # next beam, candidate of its parent
        parent = next_beams[0][beams]
        live = scores[parent, candidates].isfinite()
        next_beam = torch.full_like(tokens, -1)
        next_beam[parent[live], candidates[live]] = beams[live]
        finished = torch.zeros_like(tokens, dtype=torch.bool)
        finished[ended_beams] = tokens[ended_beams] == EOS_ID
        parents = self._parents(k)
        self.steps.append(
            TraceStep(
                beam_scores=beam_scores.cpu(),
                parents=parents,
                tokens=tokens.cpu(),
                log_probs=log_probs.cpu(),
                scores=scores.cpu(),
                next_beam=next_beam.cpu(),
                finished=finished.cpu(),
                penalty=penalty,
                attention=attention.float().mean(dim=1).cpu(),
            )
        )

    def _parents(self, k: int) -> Tensor:
        """(K, 2) the (beam, candidate) of the last recorded step each beam continues."""
        parents = torch.full((k, 2), -1, dtype=torch.long)
        if self.steps:
            beams, candidates = (self.steps[-1].next_beam >= 0).nonzero(as_tuple=True)
            parents[self.steps[-1].next_beam[beams, candidates]] = torch.stack(
                [beams, candidates], dim=1
            )
        return parents

    def prefix(self, step: int, beam: int) -> list[int]:
        """The output tokens of beam `beam` before step `step` (following its parents)."""
        tokens: list[int] = []
        while step > 0:
            beam, candidate = self.steps[step].parents[beam].tolist()
            step -= 1
            tokens.append(int(self.steps[step].tokens[beam, candidate]))
        return tokens[::-1]

    def finished(self) -> list[Finished]:
        """Every finished hypothesis, best first (by score; earlier steps first among equals,
        then the better candidate), as the search ranks its n-best list."""
        found = []
        for number, step in enumerate(self.steps):
            beams, candidates = step.finished.nonzero(as_tuple=True)
            final = step.final_scores()
            for beam, candidate in zip(beams.tolist(), candidates.tolist(), strict=True):
                found.append(
                    Finished(
                        step=number,
                        beam=beam,
                        candidate=candidate,
                        tokens=self.prefix(number, beam),
                        raw_score=float(step.scores[beam, candidate]),
                        penalty=step.penalty,
                        score=float(final[beam, candidate]),
                    )
                )
        return sorted(found, key=lambda hypothesis: (-hypothesis.score, hypothesis.step))
