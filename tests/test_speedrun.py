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
from results_table import NO_SPEEDRUN, sections, speedrun_section
from torch._dynamo.utils import counters

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
    counters.clear()  # Dynamo counts the graphs of this process: of earlier tests too
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


def speedrun_record(
    folder: Path, stamp: str, seconds: float, bleu: float, seeds: int = 3, **changes: object
) -> Path:
    """A speedrun record of `seeds` seeds whose mean seconds and test BLEU are those given
    (each seed 1 s and 0.1 BLEU apart), written as speedrun-<hardware>-<stamp>.json."""
    hardware = str(changes.pop("hardware", "NVIDIA H100 80GB HBM3"))
    times = [seconds + i - (seeds - 1) / 2 for i in range(seeds)]
    scores = [bleu + 0.1 * (i - (seeds - 1) / 2) for i in range(seeds)]
    record = {
        "kind": "speedrun",
        "dry_run": False,
        "environment": {
            "device_name": hardware,
            "torch": "2.11.0+cu130",
            "created": f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:8]}T10:00:00+0000",
            "command": "python benchmarks/speedrun.py",
            "git_revision": "0123456789abcdef",
            "git_dirty": False,
        },
        "summary": {
            "seeds": seeds,
            "seconds_to_test_score": speedrun.spread(times),
            "test_bleu": speedrun.spread(scores),
            "tgt_tokens_per_second": speedrun.spread([1_000_000.0] * seeds),
            "target_bleu": 40.0,
            "reached": bleu >= 40.0,
        },
        **changes,
    }
    slug = hardware.lower().replace(" ", "-")
    path = folder / f"speedrun-{slug}-{stamp}-100000.json"
    path.write_text(json.dumps(record))
    return path


def test_the_record_table_keeps_its_rules(tmp_path: Path) -> None:
    """A row for each run on a GPU of at least 3 seeds whose mean test BLEU reaches the target
    and whose mean seconds beat the last row of the same hardware, in the order of their
    times; the others counted under the table, the latest of each hardware named."""
    assert speedrun_section([]) == NO_SPEEDRUN
    paths = [
        speedrun_record(tmp_path, "20270101", 70.0, 40.2),  # record
        speedrun_record(tmp_path, "20270102", 75.0, 40.5),  # slower
        speedrun_record(tmp_path, "20270103", 50.0, 39.9),  # short of the target
        speedrun_record(tmp_path, "20270104", 50.0, 41.0, seeds=2),  # too few seeds
        speedrun_record(tmp_path, "20270105", 5.0, 45.0, dry_run=True),  # not even counted
        speedrun_record(tmp_path, "20270106", 80.0, 40.0, hardware="NVIDIA H200"),  # record
        speedrun_record(tmp_path, "20270107", 65.0, 40.1),  # record
    ]
    assert speedrun_section(paths[::-1]) == (
        "| Hardware | Seconds to test score | Test BLEU | Target tok/s | Seeds | Date | Command | "
        "Commit | Record |\n"
        "|---|---|---|---|---|---|---|---|---|\n"
        + "".join(
            f"| {hardware}, torch 2.11.0+cu130 | {seconds} | {bleu} | 1,000,000 | 3 | {date} | "
            f"`python benchmarks/speedrun.py` | `0123456789` | `{paths[i]}` |\n"
            for i, hardware, seconds, bleu, date in [
                (
                    0,
                    "NVIDIA H100 80GB HBM3",
                    "70.0 ± 1.0 (69.0–71.0)",
                    "40.20 ± 0.10 (40.10–40.30)",
                    "2027-01-01",
                ),
                (
                    5,
                    "NVIDIA H200",
                    "80.0 ± 1.0 (79.0–81.0)",
                    "40.00 ± 0.10 (39.90–40.10)",
                    "2027-01-06",
                ),
                (
                    6,
                    "NVIDIA H100 80GB HBM3",
                    "65.0 ± 1.0 (64.0–66.0)",
                    "40.10 ± 0.10 (40.00–40.20)",
                    "2027-01-07",
                ),
            ]
        )
        + "\nNVIDIA H100 80GB HBM3: 3 runs not a record (fewer than 3 seeds, short of the target "
        f"or slower); the latest, `{paths[3]}`: test BLEU 41.00 ± 0.07 (40.95–41.05) in "
        "50.0 ± 0.7 (49.5–50.5) s, 2 seeds, target 40."
    )


def test_the_docs_record_table_is_the_generated_one() -> None:
    """docs/benchmarks.md holds between its speedrun markers what benchmarks/results_table.py
    makes of the committed records (`--update docs/benchmarks.md` writes it)."""
    page = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    shown = page.split("<!-- speedrun:start -->\n")[1].split("\n<!-- speedrun:end -->")[0]
    assert shown == sections(ROOT / "results")["speedrun"]
    if not list((ROOT / "results" / "bench").glob("speedrun-*.json")):
        assert shown == NO_SPEEDRUN
