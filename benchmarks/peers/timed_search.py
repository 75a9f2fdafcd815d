#!/usr/bin/env python3
"""Run fairseq-generate or onmt_translate in this process, timing each batch's search.

    timed_search.py TIMES fairseq-generate ARGS...   # run with WORK/venv/bin/python
    timed_search.py TIMES onmt_translate ARGS...

Both report only a total time, so decoding one sentence at a time gives no median per
sentence. This wraps the call that each times a batch with (fairseq-generate: the task's
inference_step; onmt_translate: the translator's translate_batch), runs the command as it is
otherwise run, and writes the seconds of each call to TIMES as JSON: {"batch_seconds": [...]}.
"""

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def timed(function: Callable[..., Any], seconds: list[float]) -> Callable[..., Any]:
    """`function`, appending the seconds of each call to `seconds`."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        result = function(*args, **kwargs)
        seconds.append(time.perf_counter() - start)
        return result

    return wrapper


def main() -> None:
    times, command, args = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
    seconds: list[float] = []
    if command == "fairseq-generate":
        from fairseq.tasks.translation import TranslationTask
        from fairseq_cli.generate import cli_main

        TranslationTask.inference_step = timed(TranslationTask.inference_step, seconds)
    elif command == "onmt_translate":
        from onmt.bin.translate import main as cli_main
        from onmt.translate.translator import Translator

        Translator.translate_batch = timed(Translator.translate_batch, seconds)
    else:
        sys.exit(f"unknown command {command}: expected fairseq-generate or onmt_translate")
    sys.argv = [command, *args]
    cli_main()
    times.write_text(json.dumps({"batch_seconds": seconds}) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
