"""Training speed of a peer over steps (warmup, warmup + timed], from its own interval log.

    interval_speed.py fairseq|onmt TRAIN_LOG TIME_LOG [WARMUP [TIMED]]   # defaults 10 and 30

fairseq (--log-format json) logs `wpb` (target tokens per batch) and `wps` (target tokens/s)
per interval; OpenNMT-py logs `bsz: src/tgt/sents` and `src/tgt tok/s`. The time of the window
is the sum over its intervals of tokens / speed. TIME_LOG is the output of /usr/bin/time -v,
for the peak resident set size. Prints one JSON object.
"""

import json
import re
import sys
from pathlib import Path

ONMT_LINE = re.compile(
    r"Step\s+(\d+)/\s*\d+;.*?bsz:\s*\d+/\s*(\d+)/\s*\d+;\s*[\d.]+/\s*([\d.]+) tok/s"
)


def intervals(kind: str, log: str) -> list[tuple[int, float, float]]:
    """(step at the end of the interval, target tokens per step, target tokens/s) per line."""
    found = []
    for line in log.splitlines():
        if kind == "fairseq":
            match = re.search(r"\{.*\}", line)
            if "train_inner" in line and match:
                record = json.loads(match.group(0))
                found.append((int(record["num_updates"]), record["wpb"], record["wps"]))
        elif match := ONMT_LINE.search(line):
            found.append((int(match.group(1)), float(match.group(2)), float(match.group(3))))
    return [(step, float(tokens), float(speed)) for step, tokens, speed in found]


def main() -> None:
    kind, train_log, time_log = sys.argv[1:4]
    warmup = int(sys.argv[4]) if len(sys.argv) > 4 else 10
    timed = int(sys.argv[5]) if len(sys.argv) > 5 else 30
    steps = tokens = seconds = 0.0
    previous = 0
    for step, tokens_per_step, speed in intervals(kind, Path(train_log).read_text()):
        count, previous = step - previous, step
        if warmup < step <= warmup + timed:
            steps += count
            tokens += tokens_per_step * count
            seconds += tokens_per_step * count / speed
    peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", Path(time_log).read_text())
    summary = {
        "timed_steps": steps,
        "tgt_tokens_per_step": round(tokens / steps, 1),
        "tgt_tokens_per_second": round(tokens / seconds, 1),
        "steps_per_second": round(steps / seconds, 4),
        "peak_rss_mib": round(int(peak.group(1)) / 1024, 1) if peak else None,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
