"""The processes that train one run together, and how they share the work: one strategy, chosen once per run.

:class:`World` is the torch.distributed group (or this process alone). A :class:`Strategy` says everything
that differs between a whole model in each process (one process, or data parallel with the gradients
summed: :class:`Strategy` itself) and a model sharded over them (:class:`Sharded`: PyTorch FSDP2): where the model is
loaded, how it is wrapped, which examples of a micro-batch this process computes, how the loss is scaled,
how the scoring is shared, and how the full states are gathered for a checkpoint. :func:`strategy_for` picks it from the
world and ``training.strategy``; the trainer asks it and never tests a flag.

Imports torch.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from gengen.study.families import Family, is_decoder_layer
from gengen.study.training_config import TrainingConfig

__all__ = ["Sharded", "Strategy", "World", "current_world", "strategy_for"]


@dataclass(frozen=True)
class World:
    """The processes training one run together (torch.distributed), or just this one.

    Data parallel: every process holds the whole model, computes the gradient of its share of each micro-batch
    (examples ``rank::size``), the gradients are summed across processes, and every process takes the same
    optimiser step. Each process scores a shard of every test set; process 0 alone writes the store and saves
    checkpoints (one writer), the others wait for it.
    """

    rank: int = 0
    size: int = 1

    @property
    def main(self) -> bool:
        """Whether this process is the one that writes."""
        return self.rank == 0

    def barrier(self) -> None:
        """Wait for every process (no-op alone)."""
        if self.size > 1:
            torch.distributed.barrier()

    def sum_gradients(self, params: Sequence[torch.Tensor]) -> None:
        """Sum each parameter's gradient over the processes (a process without examples contributes zeros)."""
        if self.size == 1:
            return
        for param in params:
            if param.grad is None:
                param.grad = torch.zeros_like(param)
            torch.distributed.all_reduce(param.grad, op=torch.distributed.ReduceOp.SUM)


def current_world() -> World:
    """The distributed world this process belongs to, joining it when launched by torchrun (``WORLD_SIZE`` > 1).

    The backend is NCCL on GPUs (each process on ``cuda:LOCAL_RANK``), gloo on the CPU.
    """
    import torch.distributed as dist

    if not dist.is_available():
        return World()
    if not dist.is_initialized():
        if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
            return World()
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        if backend == "nccl":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
        # Process 0 scores every test set while the others wait: allow for long evaluations.
        dist.init_process_group(backend, timeout=datetime.timedelta(hours=4))
    return World(dist.get_rank(), dist.get_world_size())


class Strategy:
    """How the processes of a :class:`World` share one run's model (the base: a whole model in each).

    Parameters
    ----------
    world : World
    """

    name = "data parallel"

    def __init__(self, world: World):
        self.world = world

    def load_device(self, device: torch.device) -> torch.device:
        """Where the model is loaded before :meth:`wrap`."""
        return device

    def wrap(self, model: Any, device: torch.device, family: Family) -> None:
        """Prepare a freshly built model (nothing to do for a whole model)."""

    def load_optimizer_state(self, model: Any, optimizer: Any, state: dict[str, Any]) -> None:
        """Restore the optimiser from a checkpoint's full state."""
        optimizer.load_state_dict(state)

    def share(self, micro: np.ndarray) -> tuple[np.ndarray, float] | None:
        """This process's examples of a micro-batch (``rank::size``) and their weight; None: nothing to do."""
        share = micro[self.world.rank :: self.world.size]
        return (share, 1.0) if len(share) else None

    def loss_factor(self) -> float:
        """What the loss is multiplied by so that the step's gradient is the sum over processes."""
        return 1.0

    def reduce(self, params: Sequence[torch.Tensor]) -> None:
        """Sum the gradients over the processes after the backward passes."""
        self.world.sum_gradients(params)

    def splits_scoring(self) -> bool:
        """Whether each process scores a shard of every test set (a whole model in each process)."""
        return True

    def gather(self, model: Any, optimizer: Any) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """Full model and optimiser states for a checkpoint (None: the model holds them already)."""
        return None, None


class Sharded(Strategy):
    """Parameters, gradients and optimiser states sharded over the processes with FSDP2.

    The model is loaded on the CPU and each process keeps its shard on its device; each decoder layer (the
    family's :attr:`gengen.study.families.Family.decoder_layer`) is one unit. Forward and backward passes are
    collective, so every process takes part in every micro-batch and in scoring.
    """

    name = "sharded (FSDP)"

    def load_device(self, device: torch.device) -> torch.device:
        """On the CPU: each process moves only its shard to its device."""
        return torch.device("cpu")

    def wrap(self, model: Any, device: torch.device, family: Family) -> None:
        """Shard each decoder layer, then the rest, over the processes on ``device``."""
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh(device.type, (self.world.size,))
        for module in list(model.modules()):
            if is_decoder_layer(module, family):
                fully_shard(module, mesh=mesh)
        fully_shard(model, mesh=mesh)

    def load_optimizer_state(self, model: Any, optimizer: Any, state: dict[str, Any]) -> None:
        """Scatter a checkpoint's full optimiser state to the shards."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

        options = StateDictOptions(full_state_dict=True)
        set_optimizer_state_dict(model, optimizer, optim_state_dict=state, options=options)

    def share(self, micro: np.ndarray) -> tuple[np.ndarray, float] | None:
        """This process's examples, or one example that counts 0 (every process must run the pass)."""
        share = micro[self.world.rank :: self.world.size]
        return (share, 1.0) if len(share) else (micro[:1], 0.0)

    def loss_factor(self) -> float:
        """FSDP averages the gradients over the processes; the step needs their sum."""
        return float(self.world.size)

    def reduce(self, params: Sequence[torch.Tensor]) -> None:
        """Nothing: FSDP reduced the gradients in the backward pass."""

    def splits_scoring(self) -> bool:
        """No: the sharded forward pass is collective, so every process scores every example."""
        return False

    def gather(self, model: Any, optimizer: Any) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """The full states, on the CPU (every process must call this)."""
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            get_model_state_dict,
            get_optimizer_state_dict,
        )

        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        return get_model_state_dict(model, options=options), get_optimizer_state_dict(model, optimizer, options=options)


def strategy_for(world: World, training: TrainingConfig) -> Strategy:
    """The strategy of a run: sharded when several processes train it with ``strategy = "fsdp"``."""
    return Sharded(world) if world.size > 1 and training.strategy == "fsdp" else Strategy(world)
