"""Two gloo processes on 127.0.0.1 for tests/test_distributed.py: a free port, a bounded run
that ends by itself, and the model and training loop each rank runs.

Workers are module-level functions (the spawn start method imports this module in each
child). Results come back as NumPy arrays: a tensor sent through a queue shares memory with a
process that may be gone by the time it is read.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import socket
import traceback
from typing import Any, Callable

import torch
import torch.distributed as dist
import torch.nn as nn

WORLD = 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(worker: Callable[..., Any], *args: Any, timeout: float = 600.0) -> Any:
    """Run ``worker(rank, *args)`` in WORLD processes joined in one gloo group; rank 0's result.

    Each process is killed after ``timeout`` seconds; an exception in any rank fails the call
    with that rank's traceback."""
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    port = free_port()
    processes = [ctx.Process(target=_rank_main, args=(rank, port, worker, args, results), daemon=True)
                 for rank in range(WORLD)]
    for p in processes:
        p.start()
    try:
        outcomes = {}
        while len(outcomes) < WORLD:
            rank, ok, value = results.get(timeout=timeout)
            if not ok:
                raise AssertionError(f"rank {rank} failed:\n{value}")
            outcomes[rank] = value
        return outcomes[0]
    except queue.Empty:
        raise AssertionError(f"the {WORLD} ranks did not finish within {timeout:.0f} s") from None
    finally:
        for p in processes:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()


def _rank_main(rank: int, port: int, worker: Callable, args: tuple, results) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)  # two ranks on the CI's two cores
    try:
        dist.init_process_group("gloo", rank=rank, world_size=WORLD)
        try:
            results.put((rank, True, worker(rank, *args)))
        finally:
            dist.destroy_process_group()
    except BaseException:  # noqa: BLE001 - reported to the parent, which fails the test
        results.put((rank, False, traceback.format_exc()))


# ---- the model: an FNO-like stack of spectral layers with complex parameters -----------------


class Spectral(nn.Module):
    """rfft2 -> the low modes mixed by a complex weight (written into a zero spectrum) ->
    irfft2 -> a real Linear over the last dim."""

    def __init__(self, channels: int = 4, modes: int = 4, size: int = 16):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(channels, channels, modes, modes, dtype=torch.complex64) * 0.1)
        self.linear = nn.Linear(size, size)
        self.modes = modes

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = torch.fft.rfft2(x)
        m = self.modes
        out = torch.zeros_like(z)
        out[..., :m, :m] = torch.einsum("bixy,ioxy->boxy", z[..., :m, :m], self.weight)
        return self.linear(torch.fft.irfft2(out, s=x.shape[-2:]))


class Stack(nn.Module):
    def __init__(self, layers: int = 3):
        super().__init__()
        self.layers = nn.ModuleList(Spectral() for _ in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers[:-1]:
            x = torch.relu(layer(x))
        return self.layers[-1](x)


def ddp_training(rank: int, compiler: str | None, split: bool, steps: int = 3) -> dict[str, Any]:
    """``steps`` SGD steps of DDP over :class:`Stack` on rank-specific data; ``compiler``:
    None (eager DDP) or realify's inner compiler. ``split``: DDPOptimizer splits the graph
    at bucket boundaries (small buckets make several pieces)."""
    import realify

    torch.manual_seed(0)
    model = Stack()
    # torch needs its first bucket to hold >= 1 MiB by default: small buckets need both
    torch.distributed._DEFAULT_FIRST_BUCKET_BYTES = 1024
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.001)
    torch._dynamo.config.optimize_ddp = split
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    step_fn = ddp if compiler is None else realify.compile(ddp, inner=compiler)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.manual_seed(1 + rank)
    losses = []
    for _ in range(steps):
        loss = step_fn(torch.randn(2, 4, 16, 16)).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return {"losses": losses, "parameters": [p.detach().numpy().copy() for p in model.parameters()],
            "graphs": int(torch._dynamo.utils.counters["realify"]["graphs"])}
