"""benchmarks/speedrun.py, the speed record's benchmark, on a CPU: its dry run takes every step
(the untimed epoch, each seed, the test score, the record), its processes run in this one; and
the record table of docs/benchmarks.md is what benchmarks/results_table.py makes of the
committed records. That the speedrun's compiled training meets at most len(length_buckets)
shapes over a real Multi30k epoch is tests/test_compile.py's (it prepares Multi30k anyway)."""

import json
import statistics
from pathlib import Path

import pytest
import speedrun

ROOT = Path(__file__).resolve().parents[1]


def in_this_process(command: list[str], env: dict[str, str]) -> None:
    """speedrun.start's stand-in: the process `command` describes (this script with its
    options) run here, which spares the start of a Python that imports torch."""
    assert command[1] == str(ROOT / "benchmarks" / "speedrun.py")
    args = speedrun.parse_args(command[2:])
    (speedrun.one_seed if args.one_seed is not None else speedrun.warm_up)(args)


def test_dry_run_writes_one_record_per_seed_and_their_summary(
    reversal: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(speedrun, "start", in_this_process)
    argv = ["--dry-run", "--seeds", "2", "--data", str(reversal), "--work", str(tmp_path)]
    argv += ["--out-dir", str(tmp_path / "out"), "--set", "data.vocab_size=32"]
    args = speedrun.parse_args(argv)
    args.work, args.data = args.work.resolve(), args.data.resolve()
    path = speedrun.benchmark(args)

    assert path.parent == tmp_path / "out" and path.name.startswith("speedrun-cpu-")
    record = json.loads(path.read_text())
    assert record["kind"] == "speedrun" and record["dry_run"] is True
    assert record["overrides"] == ["data.vocab_size=32"]
    assert record["configuration"] == (ROOT / speedrun.CONFIG).read_text()
    assert record["warm_up"]["seconds"] >= 0
    assert (tmp_path / "warm-up" / "best.pt").is_file()
    runs = record["runs"]
    assert [run["seed"] for run in runs] == [1, 2]
    for run in runs:
        assert run["steps"] == 4 and run["device_name"] is None
        assert [step for step, _, _ in run["validations"]] == [2, 4]
        assert run["best_valid_bleu"] == max(bleu for _, _, bleu in run["validations"])
        assert run["test"]["sentences"] == speedrun.DRY_RUN_TEST_SENTENCES
        assert run["test"]["beam_size"] == 5 and 0 <= run["test"]["bleu"] <= 100
        assert run["seconds_to_test_score"] > run["validations"][-1][1] > 0
        assert run["tgt_tokens_per_second"] > 0 and run["graphs_compiled"] == 0
    summary = record["summary"]
    seconds = [run["seconds_to_test_score"] for run in runs]
    assert summary["seeds"] == 2 and summary["target_bleu"] == 40.0
    assert summary["seconds_to_test_score"] == {
        "mean": round(statistics.mean(seconds), 2),
        "stdev": round(statistics.stdev(seconds), 2),
        "min": min(seconds),
        "max": max(seconds),
    }
    assert summary["reached"] is (statistics.mean(r["test"]["bleu"] for r in runs) >= 40)


def test_spread_of_one_value_has_no_deviation() -> None:
    assert speedrun.spread([38.5]) == {"mean": 38.5, "stdev": None, "min": 38.5, "max": 38.5}
    assert speedrun.spread([1.0, 2.0, 4.0]) == {"mean": 2.33, "stdev": 1.53, "min": 1.0, "max": 4.0}


def test_a_missing_corpus_is_one_error_line(tmp_path: Path) -> None:
    args = speedrun.parse_args(["--data", str(tmp_path / "none"), "--work", str(tmp_path)])
    with pytest.raises(speedrun.UserError, match=r"^--data .*/none: not a prepared corpus"):
        speedrun.benchmark(args)
