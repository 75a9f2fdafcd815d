"""What the server accepts: the size of a request, the queue, and how requests are batched."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """The server's limits and batching settings (seq2seq serve sets each with an option).

    max_lines: lines in one request; max_line_chars: characters in one line; max_body_bytes: the
    size of a request body; max_beam: the largest beam a request may ask for, within the beams
    any search allows (seq2seq.config_rules.ARGUMENTS["beam"], which the request's schema checks
    first); max_beam_steps: a request's beam times the longest output any of its lines may have
    (`ServerState.check_cost`). Past one of these but max_beam a request gets 413, naming the
    limit.

    max_queue_lines: lines waiting for the decoding worker; a request that would go past it gets
    503 with Retry-After. timeout_s: how long a request may wait for its answer (504 after).

    batch_sentences / batch_tokens: the most sentences and source tokens the worker merges into
    one decoding batch (a single larger request is decoded alone, in the translator's own
    batches); batch_wait_s: how long the oldest queued request waits for others to join it.
    """

    max_lines: int = 64
    max_line_chars: int = 1000
    max_body_bytes: int = 256 * 1024
    max_beam: int = 16
    max_beam_steps: int = 4000
    max_queue_lines: int = 256
    timeout_s: float = 30.0
    batch_sentences: int = 64
    batch_tokens: int = 4096
    batch_wait_s: float = 0.005
