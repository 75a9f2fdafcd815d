"""Never losing work: Ctrl-C and SIGTERM save and resume exactly, a crash at any file operation
of a save resumes to the same files, finished runs do nothing, and bad states are one line."""

import errno
import hashlib
import os
import pty
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from commands import SEQ2SEQ, default_sigint, run_in_process
from reversal import DEFAULTS, ENV, TRAIN, assert_resumed_exactly, tiny_overrides

from seq2seq import files as files_module
from seq2seq.checkpoints import load_checkpoint
from seq2seq.config_file import load_config
from seq2seq.errors import UserError
from seq2seq.training import checkpoint as checkpoint_module
from seq2seq.training import loop as train_module
from seq2seq.training.checkpoint import save_checkpoint
from seq2seq.training.run_lock import RunFolderLock
from seq2seq.training.signals import StopSignals

ROOT = Path(__file__).resolve().parents[1]


# The signal comes after step 10: the steps after it leave the test time to send it, however
# loaded the machine (a tiny step takes milliseconds).
STEPS = 200


def signal_args(reversal: Path, run_dir: Path) -> list[str]:
    """STEPS steps with no save but the validation at the last step and the one a signal
    makes."""
    return [
        *tiny_overrides("transformer", reversal, run_dir),
        "model.dropout=0.1",  # dropout draws random numbers: resume must restore the generator
        "train.max_tokens=512",
        f"train.max_steps={STEPS}",
        f"train.valid_every={STEPS}",
        "train.save_every=0",
        "train.save_every_minutes=0",
        "train.log_every=1000",
        "train.log_every_seconds=0.2",
        "train.valid_max_sentences=20",
    ]


def logged_steps(text: str) -> list[int]:
    """The steps of the log lines "<date> <time> step N epoch E loss ..." in `text`."""
    return [int(line.split()[3]) for line in text.splitlines() if " epoch " in line]


def checksums(folder: Path) -> dict[str, tuple[str, int]]:
    return {
        path.name: (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns)
        for path in sorted(folder.iterdir())
    }


@pytest.fixture(scope="module")
def whole(reversal: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The uninterrupted run of STEPS steps."""
    run_dir = tmp_path_factory.mktemp("whole") / "run"
    result = subprocess.run(
        TRAIN + signal_args(reversal, run_dir), env=ENV, cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"no checkpoint in {run_dir}: starting a new run" in result.stdout
    return run_dir


@pytest.mark.slow  # trains in other processes
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_saves_last_pt_and_the_run_resumes_exactly(
    signum: int, reversal: Path, whole: Path, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    args = signal_args(reversal, run_dir)
    process = subprocess.Popen(
        TRAIN + args, env=ENV, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    log = run_dir / "train.log"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        if log.is_file() and max(logged_steps(log.read_text()), default=0) >= 10:
            break
        time.sleep(0.05)
    assert process.poll() is None, "the run ended before it could be interrupted"
    process.send_signal(signum)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 128 + signum, stderr[-2000:]
    last = run_dir / "last.pt"
    step = load_checkpoint(last)["step"]
    assert 10 <= step < STEPS
    assert stderr.splitlines()[-1] == (
        f"interrupted at step {step}: saved {last}; run the same command to resume"
    )
    assert "Traceback" not in stderr
    steps = logged_steps(stdout)  # by time (every 0.2 s), not every 1000 steps: not a terminal
    assert len(steps) >= 2 and all(s % 1000 for s in steps)

    result = subprocess.run(TRAIN + args, env=ENV, cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"resumed from {last} at step {step}" in result.stdout
    assert_resumed_exactly(whole, run_dir, STEPS)


@pytest.mark.slow  # trains in other processes
def test_ctrl_c_with_the_output_piped_to_a_dead_reader_saves_and_logs(
    reversal: Path, tmp_path: Path
) -> None:
    """`make train | cat > log` and Ctrl-C: the terminal's SIGINT ends `cat` too, so the run's
    next log line meets a closed pipe. It still saves last.pt and writes its "interrupted" line
    into <run>/train.log, and the checkpoint translates."""
    run_dir = tmp_path / "run"
    process = subprocess.Popen(
        TRAIN + signal_args(reversal, run_dir),
        env={**ENV, "PYTHONUNBUFFERED": ""},  # block-buffered, as in a pipe
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    log = run_dir / "train.log"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        if log.is_file() and max(logged_steps(log.read_text()), default=0) >= 10:
            break
        time.sleep(0.05)
    assert process.poll() is None, "the run ended before it could be interrupted"
    process.stdout.close()  # the reader dies first
    time.sleep(1)  # and log lines (every 0.2 s) meet the closed pipe before the signal comes
    process.send_signal(signal.SIGINT)
    stderr = process.stderr.read()
    assert process.wait(timeout=120) == 130, stderr[-2000:]
    last = run_dir / "last.pt"
    step = load_checkpoint(last)["step"]
    assert log.read_text().splitlines()[-1].endswith(f" interrupted at step {step}: saved {last}")
    assert "Traceback" not in stderr and "Exception ignored" not in stderr
    translate = [*SEQ2SEQ, "translate", "--checkpoint", str(last)]
    result = subprocess.run(translate, input="a b c\n", capture_output=True, text=True, env=ENV)
    assert result.returncode == 0 and result.stdout.count("\n") == 1, result.stderr


@pytest.mark.slow  # trains in other processes (whole)
def test_a_finished_run_started_again_does_nothing(reversal: Path, whole: Path) -> None:
    before = checksums(whole)
    result = run_in_process(["train", "--config", str(DEFAULTS), *signal_args(reversal, whole)])
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines()[-1].startswith(
        f"run {whole} already finished at step {STEPS} (train.max_steps={STEPS} reached); best "
        "valid BLEU"
    )
    assert checksums(whole) == before


def test_a_second_signal_during_a_save_leaves_the_previous_file(tmp_path: Path, monkeypatch):
    path = tmp_path / "last.pt"
    save_checkpoint({"step": 1}, path)
    before = path.read_bytes()

    def save_then_signalled_twice(obj, file) -> None:
        file.write(b"partial")
        os.kill(os.getpid(), signal.SIGTERM)  # the first asks for a stop
        os.kill(os.getpid(), signal.SIGTERM)  # the second gives up at once

    monkeypatch.setattr(checkpoint_module.torch, "save", save_then_signalled_twice)
    with pytest.raises(SystemExit) as stopped, StopSignals():
        save_checkpoint({"step": 2}, path)
    assert stopped.value.code == 128 + signal.SIGTERM
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.pt"]  # no temporary file
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # handlers restored


def crash_cfg(reversal: Path, run_dir: Path):
    """4 steps, validated at 2 and 4, the last step checkpoint kept."""
    overrides = tiny_overrides("transformer", reversal, run_dir)
    overrides += ["train.max_tokens=512", "train.max_steps=4", "train.valid_every=2"]
    overrides += ["train.keep_last=1", "train.save_every_minutes=0", "train.attention_samples=0"]
    overrides += ["train.valid_max_sentences=5", "train.attention_history=0"]
    return load_config(None, overrides)


def saved_weights(path: Path) -> dict[str, torch.Tensor]:
    checkpoint = load_checkpoint(path)
    return {"step": torch.tensor(checkpoint["step"]), **checkpoint["model"]}


def same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.slow  # trains a dozen times in this process
def test_a_crash_at_any_file_operation_of_a_save_resumes_to_the_same_files(
    reversal: Path, tmp_path: Path, monkeypatch
) -> None:
    reference = tmp_path / "reference"
    reference.mkdir()
    users = {"step-120-copy.pt": b"mine", "step-final.pt": b"also mine"}
    for name, data in users.items():
        (reference / name).write_bytes(data)
    (reference / ".last.pt.x1y2.tmp").write_bytes(b"left by a killed save")
    real_replace, renames = os.replace, []

    def counting_replace(source, target) -> None:
        renames.append(Path(target).name)
        real_replace(source, target)

    monkeypatch.setattr(files_module.os, "replace", counting_replace)
    train_module.train(crash_cfg(reversal, reference))
    monkeypatch.setattr(files_module.os, "replace", real_replace)
    assert renames[:3] == ["step-2.pt", "best.pt", "last.pt"]  # then step-4 [best] last
    assert renames[3] == "step-4.pt" and renames[-1] == "last.pt" and len(renames) in (5, 6)
    expected = {p.name: saved_weights(p) for p in reference.glob("*.pt") if p.name not in users}
    assert sorted(expected) == ["best.pt", "last.pt", "step-4.pt"]  # step-2.pt pruned
    assert all((reference / name).read_bytes() == data for name, data in users.items())

    for crash_at in range(len(renames)):
        run_dir = tmp_path / f"crash{crash_at}"
        calls = []

        def failing_replace(source, target, calls=calls, crash_at=crash_at) -> None:
            calls.append(target)
            if len(calls) == crash_at + 1:
                raise OSError(errno.EIO, "injected failure")
            real_replace(source, target)

        monkeypatch.setattr(files_module.os, "replace", failing_replace)
        failed = r"cannot write the checkpoint .* previous one is intact"
        with pytest.raises(UserError, match=failed):
            train_module.train(crash_cfg(reversal, run_dir))
        monkeypatch.setattr(files_module.os, "replace", real_replace)
        if (run_dir / "last.pt").is_file():  # what its record names exists, at that step or later
            progress = load_checkpoint(run_dir / "last.pt")["training"]["progress"]
            assert load_checkpoint(run_dir / "best.pt")["step"] >= progress["best_step"]
            assert (run_dir / f"step-{progress['step']}.pt").is_file()
        train_module.train(crash_cfg(reversal, run_dir))
        found = {p.name: saved_weights(p) for p in run_dir.glob("*.pt")}
        assert found.keys() == expected.keys(), crash_at
        assert all(same_weights(found[name], expected[name]) for name in expected), crash_at


def test_resuming_with_another_number_of_processes_is_one_line(
    reversal: Path, tmp_path: Path
) -> None:
    cfg = crash_cfg(reversal, tmp_path / "run")
    cfg.train.max_steps = 5
    train_module.train(cfg)
    checkpoint = load_checkpoint(tmp_path / "run" / "last.pt")
    checkpoint["training"]["rng"] *= 2  # as if saved by two processes
    save_checkpoint(checkpoint, tmp_path / "run" / "last.pt")
    cfg.train.max_steps = 10
    with pytest.raises(UserError, match=r"last.pt: saved by 2 process\(es\), resumed by 1"):
        train_module.train(cfg)


def test_a_full_disk_is_one_line_naming_the_file(reversal: Path, tmp_path: Path, monkeypatch):
    def disk_full(obj, file) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(checkpoint_module.torch, "save", disk_full)
    run_dir = tmp_path / "run"
    with pytest.raises(UserError) as full:
        train_module.train(crash_cfg(reversal, run_dir))
    assert str(full.value) == (
        f"{run_dir / 'step-2.pt'}: cannot write the checkpoint (No space left on device); "
        "the previous one is intact"
    )
    assert not list(run_dir.glob("*.pt")) and not list(run_dir.glob(".*.tmp"))


def test_a_save_failing_inside_the_zip_writer_is_one_line(tmp_path: Path, monkeypatch) -> None:
    """On a full disk torch.save's zip writer raises a RuntimeError while the OSError is being
    handled (simulated here in-process): still the one line naming the file and the reason."""

    def zip_writer_on_a_full_disk(obj, file) -> None:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError:
            raise RuntimeError(
                "[enforce fail at inline_container.cc:672] . unexpected pos 2279680 vs 2279572"
            ) from None

    path = tmp_path / "last.pt"
    save_checkpoint({"step": 1}, path)
    before = path.read_bytes()
    monkeypatch.setattr(checkpoint_module.torch, "save", zip_writer_on_a_full_disk)
    with pytest.raises(UserError) as full:
        save_checkpoint({"step": 2}, path)
    assert str(full.value) == (
        f"{path}: cannot write the checkpoint (No space left on device); the previous one is intact"
    )
    assert path.read_bytes() == before and not list(tmp_path.glob(".*.tmp"))


@pytest.mark.slow  # trains in other processes
def test_two_trainers_cannot_share_a_run_folder(reversal: Path, tmp_path: Path) -> None:
    """A second process on a running run's folder stops at once with one line and touches
    nothing (not even the first one's temporary files); once the first is killed with -9,
    its lock is gone and a new process trains, cleaning those files under the lock."""
    run_dir = tmp_path / "run"
    args = [*signal_args(reversal, run_dir), "train.max_steps=100000", "train.valid_every=100000"]
    first = subprocess.Popen(
        TRAIN + args, env=ENV, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        log = run_dir / "train.log"
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and first.poll() is None:
            if log.is_file() and logged_steps(log.read_text()):
                break
            time.sleep(0.05)
        assert first.poll() is None, first.stderr.read().decode()[-2000:]
        in_flight = run_dir / ".last.pt.saving.tmp"  # as if the first were saving
        in_flight.write_bytes(b"partial")
        second = subprocess.run(TRAIN + args, env=ENV, cwd=ROOT, capture_output=True, text=True)
        assert second.returncode == 2, second.stderr[-2000:]
        assert second.stderr.splitlines() == [
            f"error: run folder {run_dir}: in use by a training process (pid {first.pid}); "
            "wait for it to end, or choose another train.run_name (or train.run_dir)"
        ]
        assert in_flight.read_bytes() == b"partial"
        assert first.poll() is None
    finally:
        first.kill()
        first.wait()
    assert first.returncode == -signal.SIGKILL
    third_args = [*signal_args(reversal, run_dir), "train.max_steps=2", "train.valid_every=2"]
    third = subprocess.run(TRAIN + third_args, env=ENV, cwd=ROOT, capture_output=True, text=True)
    assert third.returncode == 0, third.stderr[-2000:]
    assert load_checkpoint(run_dir / "last.pt")["step"] == 2
    assert not in_flight.exists()


@pytest.mark.slow  # starts a Python that imports torch
def test_a_killed_trainers_forked_workers_do_not_keep_its_run_folder_lock(tmp_path: Path) -> None:
    """DataLoader workers are forked from the trainer: after a kill -9 of the trainer, the lock
    is free at once, even while a forked child still runs (a flock would stay held by it)."""
    code = (
        "import os, sys, time\n"
        "from seq2seq.training.run_lock import RunFolderLock\n"
        "RunFolderLock(sys.argv[1]).__enter__()\n"
        "child = os.fork()\n"
        "if child == 0:\n"
        "    time.sleep(60)\n"
        "    os._exit(0)\n"
        "print(child, flush=True)\n"
        "time.sleep(60)\n"
    )
    trainer = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path / "run")], stdout=subprocess.PIPE, text=True
    )
    child = int(trainer.stdout.readline())
    try:
        trainer.kill()
        trainer.wait()
        with RunFolderLock(tmp_path / "run"):  # would be refused while the child held it
            os.kill(child, 0)  # the forked child is still running
    finally:
        os.kill(child, signal.SIGKILL)
        trainer.stdout.close()


def read_until(terminal: int, output: bytes, wanted: bytes | None, deadline: float) -> bytes:
    """`output` and what the terminal gives until `wanted` is in it (None: until it closes)."""
    while (wanted is None or wanted not in output) and time.monotonic() < deadline:
        try:
            chunk = os.read(terminal, 4096)
        except OSError:  # the terminal closed: its process ended
            break
        if not chunk:
            break
        output += chunk
    return output


@pytest.mark.slow  # trains in another process
def test_ctrl_c_on_make_train_says_only_where_it_saved(reversal: Path, tmp_path: Path) -> None:
    """Ctrl-C typed in a terminal at `make train`: the run saves and says so; make adds no line
    (no "make: *** [Makefile:N: train] Error 130" or "Interrupt") and exits as the run did,
    by SIGINT."""
    run_dir = tmp_path / "run"
    args = [*signal_args(reversal, run_dir), "train.max_steps=100000", "train.valid_every=100000"]
    command = ["make", "-s", "-o", ".venv/.installed", "train", f"CONFIG={DEFAULTS}"]
    command.append(f"ARGS={' '.join(args)}")
    pid, terminal = pty.fork()
    if pid == 0:  # the child: make, in the terminal, with the SIGINT a terminal gives
        os.chdir(ROOT)
        default_sigint()
        os.execvp("make", command)
    output = read_until(terminal, b"", b" epoch 0 loss ", time.monotonic() + 120)  # step 1
    os.write(terminal, b"\x03")  # Ctrl-C
    output = read_until(terminal, output, None, time.monotonic() + 120)
    _, status = os.waitpid(pid, 0)
    os.close(terminal)
    text = output.decode(errors="replace")
    assert "interrupted at step " in text and "saved" in text, text
    assert "make:" not in text, text
    assert os.waitstatus_to_exitcode(status) == -signal.SIGINT
    assert (run_dir / "last.pt").is_file()
