"""The best continuations of a beam search step without forming the whole sum.

`seq2seq.decoding.search.best_candidates` computes
`(beam_scores.view(-1, 1) + log_probs).view(A, K * V).topk(n)`: the n best (beam, token) pairs of
each sentence. The (A, K * V) sum is the largest tensor of a step; `best_candidates` here gives the
same values without it, faster on a CPU (docs/benchmarks.md).
"""

from torch import Tensor


def best_candidates(beam_scores: Tensor, log_probs: Tensor, n: int) -> tuple[Tensor, Tensor]:
    """(A, K) beam scores and (A * K, V) next-token log-probabilities -> scores (A, n) and
    indices (A, n) into the K * V (beam, token) pairs (beam * V + token), best first.

    Each beam's row is cut into chunks of C (the largest divisor of V from 64 down to 16); the
    best candidate of a chunk is its beam's score plus the chunk's maximum (adding a constant
    commutes with the maximum, rounding included), and only the n chunks with the best of these
    are searched: each of the n best candidates lies in one of them, because every chunk with a
    better maximum holds a better candidate, and fewer than n candidates are better. Same values
    as topk; indices differ only between equal values, whose order topk leaves open anyway.
    Narrow rows (fewer than 16n chunks per sentence) go to topk directly.
    """
    sentences, beams = beam_scores.shape
    vocab_size = log_probs.shape[1]
    chunk = next((c for c in range(64, 15, -1) if vocab_size % c == 0), 0)
    if chunk == 0 or beams * vocab_size < 16 * n * chunk:
        return (beam_scores.view(-1, 1) + log_probs).view(sentences, -1).topk(n, dim=1)
    chunks_per_beam = vocab_size // chunk
    chunks = log_probs.view(sentences, beams * chunks_per_beam, chunk)  # beam b: b * V / C + j
    chunk_best = chunks.amax(dim=2).view(sentences, beams, -1) + beam_scores.unsqueeze(2)
    best_chunks = chunk_best.view(sentences, -1).topk(n, dim=1).indices  # (A, n)
    chunk_beam_scores = beam_scores.gather(1, best_chunks // chunks_per_beam).unsqueeze(2)
    candidates = chunks.gather(1, best_chunks.unsqueeze(2).expand(-1, -1, chunk))  # (A, n, C)
    values, within = (candidates + chunk_beam_scores).view(sentences, n * chunk).topk(n, dim=1)
    return values, best_chunks.gather(1, within // chunk) * chunk + within % chunk
