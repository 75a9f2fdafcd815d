"""Multi-GPU and multi-node training through `torchrun` (DistributedDataParallel).

torchrun starts one process per device and sets RANK, LOCAL_RANK and WORLD_SIZE. Every rank
trains on its own share of the batches; rank 0 alone validates and writes logs and checkpoints.
A run that must stop (bad input) stops on every rank with status 2, and rank 0 alone says why
(seq2seq.commands.train).
"""

import os
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from seq2seq.errors import UserError


@dataclass
class Dist:
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_distributed(device_kind: str) -> Dist:
    """Join the process group when started by torchrun; a plain run is a world of one. On GPUs,
    a node must have one for each of its processes: every rank checks that before joining, so
    all of them stop at once when it has too few."""
    if "WORLD_SIZE" not in os.environ or int(os.environ["WORLD_SIZE"]) == 1:
        return Dist()
    processes = int(os.environ.get("LOCAL_WORLD_SIZE", 1))
    if device_kind == "cuda" and processes > torch.cuda.device_count():
        raise UserError(
            f"torchrun --nproc_per_node={processes}: this node has {torch.cuda.device_count()} "
            "GPU(s), and each process needs its own; start at most that many per node, or "
            'train on CPU processes with train.device="cpu"'
        )
    backend = "nccl" if device_kind == "cuda" else "gloo"
    dist.init_process_group(backend=backend)
    return Dist(dist.get_rank(), int(os.environ.get("LOCAL_RANK", 0)), dist.get_world_size())


def local_device(device: torch.device, env: Dist) -> torch.device:
    """This rank's device: its own GPU (LOCAL_RANK) when several share a node."""
    if env.enabled and device.type == "cuda":
        device = torch.device("cuda", env.local_rank)
        torch.cuda.set_device(device)
    return device


def wrap_model(model: torch.nn.Module, device: torch.device, env: Dist) -> torch.nn.Module:
    """`model` in DistributedDataParallel, which averages the gradients of all ranks in
    backward; the model itself without distribution."""
    if not env.enabled:
        return model
    return DistributedDataParallel(
        model, device_ids=[device.index] if device.type == "cuda" else None
    )


def sync_gradients(
    model: torch.nn.Module, env: Dist, last_micro_batch: bool
) -> AbstractContextManager:
    """With gradient accumulation, ranks exchange gradients in the last micro-batch's backward
    only; the others run under DDP's no_sync."""
    if env.enabled and not last_micro_batch:
        return model.no_sync()
    return nullcontext()


def any_rank(flags: list[bool], env: Dist, device: torch.device) -> list[bool]:
    """Each flag, true when it is true on any rank (so that all ranks stop or save together)."""
    if not env.enabled:
        return flags
    values = torch.tensor([float(flag) for flag in flags], device=device)
    dist.all_reduce(values, op=dist.ReduceOp.MAX)
    return [bool(value) for value in values.tolist()]


def all_reduce_sum(value: torch.Tensor, env: Dist) -> torch.Tensor:
    if env.enabled:
        dist.all_reduce(value, op=dist.ReduceOp.SUM)
    return value


def gather_objects(obj: Any, env: Dist) -> list[Any]:
    """Every rank's `obj`, in rank order (a list of one without distribution)."""
    if not env.enabled:
        return [obj]
    gathered: list[Any] = [None] * env.world_size
    dist.all_gather_object(gathered, obj)
    return gathered


def broadcast_object(obj: Any, env: Dist) -> Any:
    """Rank 0's `obj` on every rank."""
    if not env.enabled:
        return obj
    holder = [obj]
    dist.broadcast_object_list(holder, src=0)
    return holder[0]


def barrier(env: Dist) -> None:
    if env.enabled:
        dist.barrier()


def shutdown(env: Dist) -> None:
    if env.enabled:
        dist.destroy_process_group()
