"""Concatenation: training examples made of 2 to 4 training pairs joined, so that a model sees
inputs as long as real text.

Everyday corpora hold short sentences (Tatoeba's are 6 words long on average), and a model
trained on them alone drops the second half of a longer input. With a `share` above 0, each
training pair of the corpus is followed, with that probability, by one example that joins it to
the 1 to 3 corpus pairs before it, each side joined with a space, in corpus order:

    Tom is here.                 Tom est là.
    I am tired.                  Je suis fatigué.
    Tom is here. I am tired.     Tom est là. Je suis fatigué.      (the example added)

The draws come from a generator of their own, seeded, so the same corpus, share and seed give
the same examples, and turning concatenation on leaves copy-teaching's draws as they were. It is
off (0) by default. Only the training split gets examples, and the tokenizer learns its
vocabulary without them, as without copy-teaching's pairs (see `seq2seq.data.prepare`).
"""

import random
from collections import deque

MAX_PAIRS = 4  # the most pairs one example joins


class Concatenator:
    """Adds, after a training pair, with probability `share`, one example joining it to the
    1 to `MAX_PAIRS` - 1 pairs before it; `added` counts them (recorded in the manifest)."""

    def __init__(self, share: float, seed: int) -> None:
        self.share = share
        self.rng = random.Random(f"concatenation {seed}")
        self.before: deque[tuple[str, str]] = deque(maxlen=MAX_PAIRS - 1)
        self.added = 0

    def __call__(self, src: str, tgt: str) -> list[tuple[str, str]]:
        """The examples to add after the training pair (`src`, `tgt`): none or one."""
        examples = []
        if self.before and self.rng.random() < self.share:
            count = self.rng.randint(1, len(self.before))
            pairs = [*list(self.before)[-count:], (src, tgt)]
            examples.append((" ".join(s for s, _ in pairs), " ".join(t for _, t in pairs)))
            self.added += 1
        self.before.append((src, tgt))
        return examples
