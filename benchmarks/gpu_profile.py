#!/usr/bin/env python3
"""Profile a training step and a decoding step: where their time goes, on a GPU or a CPU.

    benchmarks/gpu_profile.py --config CONFIG --checkpoint best.pt --src test.en \\
        --out profile.json [--steps 10] [--warmup 30] [--precision bf16] [KEY=VALUE ...]

Training: trains CONFIG (with the overrides) in a new run folder (train.run_dir) with the
training loop itself (`loop.train`, its `loop.train_update` wrapped as benchmarks/gpu_syncs.py
wraps it): --warmup updates untimed (enough for every length bucket of the GPU recipe), then
--steps updates timed without the profiler, then --steps updates under `torch.profiler.profile`.
A step runs from the start of one update to the start of the next: the loop's own work between
updates counts. The run ends after those (train.max_steps and train.valid_every are set to
warmup + 2 x steps + 1: one validation, at its end, which nothing times).

Decoding: the checkpoint translates the --src lines with beam 5 as `seq2seq evaluate
--batch-size 1024` does (the Translator, its batches, the searches for the device), in
--precision, once to warm up and once under the profiler. A decoding step is one call of the
model's `decode_step` (one output position of a batch), counted as benchmarks/gpu_decode.py
counts them; the encoder and the assembling of the outputs are spread over the steps.

The JSON record names the config, its overrides and the device, and holds, for "training"
(with its warmup_steps and the mean target tokens of a profiled step) and for "decoding" (with
its sentences, beam size, batch size, precision and batches):

- steps: the profiled steps;
- wall_seconds_per_step: the profiled part's seconds per step, the device waited for at both
  ends (so its last kernels count), the profiler's own cost included (a few microseconds per
  operator); training also has unprofiled_wall_seconds_per_step, the same without the profiler;
- gpu_busy_seconds_per_step: the union of the CUDA kernels' intervals (a time when any kernel
  ran, counted once however many overlapped; copies and memsets are no kernels), per step;
  gpu_busy_share: that over wall_seconds_per_step. The rest is the GPU idle, waiting for the
  host (Python, dispatch, launches) or for a copy;
- kernel_launches_per_step: the host's calls that launch a kernel (their names begin as
  LAUNCH_CALLS), per step;
- aten_operators_per_step: the calls of aten operators, per step, the nested ones included
  (aten::linear and the aten::mm it calls count 2);
- top_by_self_cuda: the TOP operators by self CUDA time, the time of the kernels an operator
  launched itself (not those of the operators it called), and top_by_self_cpu: the TOP host
  events by self CPU time (operators, and CUDA runtime calls such as cudaLaunchKernel); each a
  name, its calls, its total milliseconds in the profiled part and its milliseconds per step.

On a CPU there are no kernels: the GPU figures (busy time and share, launches, top_by_self_cuda)
are null, and the rest a check that this runs.
"""

import time
from pathlib import Path
from typing import Any

import torch
from measure import gpu_name, synchronize, write_record
from torch.autograd import DeviceType
from torch.autograd.profiler_util import EventList, FunctionEvent
from torch.profiler import ProfilerActivity, profile

from seq2seq.commands.cli import ArgumentParser, run_cli
from seq2seq.config import Config
from seq2seq.config_file import load_config
from seq2seq.data.batching import Batch
from seq2seq.decoding.open_pytorch import load_model
from seq2seq.decoding.torch_translator import Translator
from seq2seq.device import pick_device
from seq2seq.errors import UserError
from seq2seq.files import read_lines
from seq2seq.training import loop
from seq2seq.training.run import Run, run_dir_of
from seq2seq.training.step import Update

TOP = 15  # operators in each top list
# How the names of the CUDA runtime and driver calls that launch a kernel begin (cudaLaunchKernel,
# cudaLaunchKernelExC, ...; the driver's cuLaunchKernel launches Triton's kernels)
LAUNCH_CALLS = ("cudaLaunchKernel", "cuLaunchKernel")
# How the names of the GPU's copies and fills begin in a profile; its other device events are
# kernels (by name: `activity_type` says it too, but torch 2.11's events do not have it)
COPY_EVENTS = ("Memcpy", "Memset")
DECODE_BEAM = 5  # the beam of gpu.sh's test decoding
DECODE_BATCH_SIZE = 1024  # sentences per batch, as gpu.sh's `seq2seq evaluate --batch-size`


def busy_seconds(intervals: list[tuple[float, float]]) -> float:
    """The length of the union of the (start, end) intervals: the time that at least one of
    them covers, overlaps counted once."""
    total, covered_until = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > covered_until:
            total += end - max(start, covered_until)
            covered_until = end
    return total


def is_kernel(event: FunctionEvent) -> bool:
    """Whether a profile's event is a kernel run on the GPU (not a copy or a fill)."""
    return event.device_type == DeviceType.CUDA and not event.name.startswith(COPY_EVENTS)


def new_profiler(device: torch.device) -> profile:
    """A profiler of the host's operators, and of the kernels and copies when on CUDA."""
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    return profile(activities=activities)


def top_events(averages: EventList, self_time: str, steps: int) -> list[dict[str, Any]]:
    """The TOP host events of a profile's `key_averages` by `self_time` (an attribute of each,
    in microseconds), those with none left out."""
    host = [e for e in averages if e.device_type == DeviceType.CPU]
    ranked = sorted(host, key=lambda e: getattr(e, self_time), reverse=True)[:TOP]
    return [
        {
            "name": e.key,
            "calls": e.count,
            "total_ms": getattr(e, self_time) / 1000,
            "ms_per_step": getattr(e, self_time) / 1000 / steps,
        }
        for e in ranked
        if getattr(e, self_time) > 0
    ]


def summary(profiler: profile, steps: int, seconds: float, device: torch.device) -> dict[str, Any]:
    """The figures of the module docstring of a part that took `seconds` for `steps` steps."""
    events = profiler.events()
    host = [e for e in events if e.device_type == DeviceType.CPU]
    gpu = device.type == "cuda"
    kernels = [
        (e.time_range.start, e.time_range.end)  # microseconds
        for e in events
        if is_kernel(e)
    ]
    busy = busy_seconds(kernels) / 1e6 / steps if gpu else None
    wall = seconds / steps
    averages = profiler.key_averages()
    return {
        "steps": steps,
        "wall_seconds_per_step": wall,
        "gpu_busy_seconds_per_step": busy,
        "gpu_busy_share": None if busy is None else busy / wall,
        "kernel_launches_per_step": (
            sum(e.name.startswith(LAUNCH_CALLS) for e in host) / steps if gpu else None
        ),
        "aten_operators_per_step": sum(e.name.startswith("aten::") for e in host) / steps,
        "top_by_self_cuda": top_events(averages, "self_device_time_total", steps) if gpu else None,
        "top_by_self_cpu": top_events(averages, "self_cpu_time_total", steps),
    }


class ProfiledUpdates:
    """`loop.train_update`, noting the time at the start of updates warmup + 1, warmup + steps
    + 1 and warmup + 2 x steps + 1 (the device waited for first), the profiler running between
    the last two."""

    def __init__(self, warmup: int, steps: int, device: torch.device) -> None:
        self.update, self.device = loop.train_update, device
        self.marks = (warmup + 1, warmup + steps + 1, warmup + 2 * steps + 1)
        self.profiler = new_profiler(device)
        self.times: list[float] = []
        self.calls = 0
        self.profiled_tgt_tokens = 0  # target tokens of the profiled updates

    def __call__(self, run: Run, group: list[Batch], step: int) -> Update | None:
        self.calls += 1
        if self.calls in self.marks:
            synchronize(self.device)
            if self.calls == self.marks[1]:
                self.profiler.start()  # before the time is noted: its start is not timed
            self.times.append(time.perf_counter())
            if self.calls == self.marks[2]:
                self.profiler.stop()
        if self.marks[1] <= self.calls < self.marks[2]:
            self.profiled_tgt_tokens += sum(batch.num_tgt_tokens for batch in group)
        return self.update(run, group, step)


def profile_training(cfg: Config, warmup: int, steps: int) -> dict[str, Any]:
    """Train `cfg` for warmup + 2 x steps + 1 updates in a new run folder; the figures of its
    profiled steps, their target tokens and the unprofiled seconds per step."""
    run_dir = run_dir_of(cfg)
    if (run_dir / "last.pt").exists():
        raise UserError(f"train.run_dir {run_dir}: holds a training run; name a new folder")
    cfg.train.max_steps = cfg.train.valid_every = warmup + 2 * steps + 1
    device = pick_device(cfg.train.device, "train.device")
    profiled = ProfiledUpdates(warmup, steps, device)
    loop.train_update = profiled
    try:
        loop.train(cfg)
    finally:
        loop.train_update = profiled.update
    if len(profiled.times) < len(profiled.marks):
        raise UserError(
            f"training ended after {profiled.calls} updates, before the {cfg.train.max_steps} "
            "profiled ones (train.max_epochs?)"
        )
    start, middle, end = profiled.times
    return {
        "warmup_steps": warmup,
        "target_tokens_per_step": profiled.profiled_tgt_tokens / steps,
        "unprofiled_wall_seconds_per_step": (middle - start) / steps,
        **summary(profiled.profiler, steps, end - middle, device),
    }


class CountedSteps:
    """A model's `decode_step`, counting its calls."""

    def __init__(self, decode_step: object) -> None:
        self.decode_step, self.calls = decode_step, 0

    def __call__(self, *args: object, **kwargs: object) -> object:
        self.calls += 1
        return self.decode_step(*args, **kwargs)


def evaluate_translator(checkpoint: str, device: torch.device, precision: str) -> Translator:
    """The checkpoint's Translator as gpu.sh's `seq2seq evaluate --precision PRECISION
    --batch-size 1024` makes it."""
    inference = load_model(checkpoint, device)
    decode = inference.config.decode
    decode.precision, decode.batch_size = precision, DECODE_BATCH_SIZE
    return Translator.from_inference(inference, device)


def profile_decoding(translator: Translator, lines: list[str]) -> dict[str, Any]:
    """Translate `lines` with beam DECODE_BEAM once to warm up, then once profiled; the
    figures of the profiled decoding steps."""
    device = translator.device
    translator.translate(lines, DECODE_BEAM)
    model, profiler, batches = translator.model, new_profiler(device), []
    counted = CountedSteps(model.decode_step)
    model.decode_step = counted
    try:
        with profiler:
            start = time.perf_counter()
            translator.translate(lines, DECODE_BEAM, on_batch=batches.append)
            synchronize(device)
            seconds = time.perf_counter() - start
    finally:
        del model.decode_step
    return {
        "sentences": len(lines),
        "beam_size": DECODE_BEAM,
        "batch_size": DECODE_BATCH_SIZE,
        "precision": translator.precision,
        "batches": len(batches),
        **summary(profiler, max(counted.calls, 1), seconds, device),
    }


def main() -> None:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="the training configuration file")
    parser.add_argument("--checkpoint", required=True, help="a checkpoint or model to decode with")
    parser.add_argument("--src", type=Path, required=True, help="source sentences, one a line")
    parser.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    parser.add_argument("--steps", type=int, default=10, help="profiled steps (default: 10)")
    parser.add_argument("--warmup", type=int, default=30, help="untimed steps (default: 30)")
    parser.add_argument("--precision", default="bf16", help="decoding precision (default: bf16)")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    args = parser.parse_intermixed_args()  # KEY=VALUE before and after the options
    if args.steps < 1 or args.warmup < 0:
        parser.error("--steps must be >= 1 and --warmup >= 0")
    cfg = load_config(args.config, args.overrides)
    device = pick_device(cfg.train.device, "train.device")
    lines = read_lines(args.src, f"--src {args.src}")
    translator = evaluate_translator(args.checkpoint, device, args.precision)  # checked first
    record = {
        "config": args.config,
        "overrides": args.overrides,
        "device": gpu_name(device),
        "training": profile_training(cfg, args.warmup, args.steps),
        "decoding": profile_decoding(translator, lines),
    }
    write_record(record, args.out)
    for part in ("training", "decoding"):
        print(summary_line(part, record[part]))


def summary_line(part: str, figures: dict[str, Any]) -> str:
    """One line of a part's figures: ms per step, the GPU's busy share, launches per step."""
    share, launches = figures["gpu_busy_share"], figures["kernel_launches_per_step"]
    busy = "no GPU" if share is None else f"GPU busy {share:.1%}"
    launched = "" if launches is None else f", {launches:,.0f} kernel launches per step"
    return (
        f"profile of {part}: {figures['wall_seconds_per_step'] * 1000:,.2f} ms per step, "
        f"{busy}{launched}, {figures['aten_operators_per_step']:,.0f} aten operators per step"
    )


if __name__ == "__main__":
    run_cli(main, tune=True)
