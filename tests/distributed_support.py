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
from collections.abc import Callable
from typing import Any

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
    except BaseException:
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
    losses = train(rank, step_fn, torch.optim.SGD(model.parameters(), lr=0.1), steps)
    return {"losses": losses, "parameters": [p.detach().numpy().copy() for p in model.parameters()],
            "graphs": int(torch._dynamo.utils.counters["realify"]["graphs"])}


def train(rank: int, step_fn: Callable, optimizer: torch.optim.Optimizer, steps: int,
          batch: Callable[[], torch.Tensor] = lambda: torch.randn(2, 4, 16, 16),
          seed: int | None = None) -> list[float]:
    """``steps`` steps on random batches (``batch()``), rank-specific unless ``seed`` is given
    (tensor parallelism wants the same batch on every rank), loss ``mean |out|^2``; the losses."""
    torch.manual_seed(1 + rank if seed is None else seed)
    losses = []
    for _ in range(steps):
        loss = step_fn(batch()).abs().square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def fsdp_training(rank: int, compiler: str | None, recipe: str, steps: int = 3) -> dict[str, Any]:
    """``steps`` Adam steps of FSDP2 (``fully_shard``) over :class:`Stack` on rank-specific
    data; ``compiler``: None (eager) or realify's inner compiler. FSDP2 wants one dtype per
    unit; ``recipe`` says how the spectral layers' mix of complex and real parameters gets it:
    "per-dtype-units" (the real Linear its own unit, so the layer's unit holds its complex
    weight only) or "real-pairs" (realify.complex_parameters_as_real: every parameter
    float32, one unit per layer). Returns the full (unsharded) trained parameters."""
    from torch.distributed.fsdp import fully_shard

    import realify

    torch.manual_seed(0)
    model = Stack()
    if recipe == "real-pairs":
        realify.complex_parameters_as_real(model)
    for layer in model.layers:
        if recipe == "per-dtype-units":
            fully_shard(layer.linear)
        fully_shard(layer)
    fully_shard(model)
    torch._dynamo.reset()
    step_fn = model if compiler is None else realify.compile(model, inner=compiler)
    losses = train(rank, step_fn, torch.optim.Adam(model.parameters(), lr=0.01), steps)
    trained = {}
    for name, p in model.named_parameters():
        full = p.full_tensor().detach()
        if name.endswith(".original0"):  # real pairs: compared as the complex values they store
            name, full = name.replace("parametrizations.", "").removesuffix(".original0"), torch.view_as_complex(full)
        trained[name] = full.numpy().copy()
    return {"losses": losses, "parameters": trained, "dtypes": sorted({str(p.dtype) for p in model.parameters()})}


# ---- DTensor: complex programs over sharded and replicated complex tensors -------------------


def _elementwise(a, w):
    return (a * a.conj() + 1).exp().sin() / (a + 2)


def _sum_over_sharded_dim(a, w):
    return (a.exp() * a).sum(0)


def _matmul_with_replicated_weight(a, w):
    return torch.tanh(a @ w)


def _view_as_complex_of_real(x, w):
    return torch.view_as_complex(x) * (1 + 2j) + torch.view_as_complex(x).abs()


def _branch_cuts(a, w):
    return torch.sqrt(a) + torch.log(a) * (0.5 - 1j) + a.conj() * w[0, 0]


def _scans_and_a_factorization(a, w):
    # logcumsumexp along the unsharded dim and cumprod along the sharded one; QR of the
    # replicated weight (eager's kernels on pairs, each rank on its local tensor)
    q, r = torch.linalg.qr(w)
    return torch.logcumsumexp(a, 1) + torch.cumprod(a * 0.5, 0) + (a @ q) @ r[:, :1]


# name -> (program, first input, first input's placement); inputs: "complex" Gaussian,
# "real" pairs for view_as_complex, "special" Gaussian with inf, nan and the negative real axis
# approached from both sides (±0 imaginary parts), "transposed" a non-contiguous view
DTENSOR_PROGRAMS = {
    "elementwise-sharded": (_elementwise, "complex", "shard"),
    "elementwise-replicated": (_elementwise, "complex", "replicate"),
    "sum-over-sharded-dim": (_sum_over_sharded_dim, "complex", "shard"),
    "matmul-replicated-weight": (_matmul_with_replicated_weight, "complex", "shard"),
    "view-as-complex-of-real": (_view_as_complex_of_real, "real", "shard"),
    "branch-cuts-and-special-values": (_branch_cuts, "special", "shard"),
    "non-contiguous-sharded": (_elementwise, "transposed", "shard"),
    "scans-and-qr": (_scans_and_a_factorization, "complex", "shard"),
}


def _dtensor_input(kind: str) -> torch.Tensor:
    if kind == "real":
        return torch.randn(8, 6, 2)
    if kind == "transposed":
        return torch.randn(6, 8, dtype=torch.complex64).t()
    first = torch.randn(8, 6, dtype=torch.complex64)
    if kind == "special":  # one special entry per row, on both ranks' shards
        inf, nan = float("inf"), float("nan")
        specials = [complex(-1.5, 0.0), complex(-1.5, -0.0), complex(-0.0, 0.0), complex(inf, 0.5),
                    complex(-inf, -0.0), complex(0.5, nan), complex(-2.0, -0.0), complex(0.0, -inf)]
        for row, value in enumerate(specials):
            first[row, row % 6] = value
    return first


# programs whose values realify computes differently from eager on purpose: eager adds
# complex tensors as a + 1 * b, whose product turns an infinite part of b into NaN
# (0 + (-inf + inf j) is nan + nan j), realify per part (README, "Where values differ from
# eager"); their DTensor runs are compared with realify on plain tensors (plain_programs), the
# others with eager DTensors
DIFFERS_FROM_EAGER = {"branch-cuts-and-special-values"}


def plain_programs(names) -> dict[str, Any]:
    """Programs of :data:`DTENSOR_PROGRAMS` compiled by realify (eager inner) on plain tensors
    in this process, with the inputs, outputs and gradients of :func:`dtensor_programs`."""
    results = {}
    for name in names:
        program, kind, _ = DTENSOR_PROGRAMS[name]
        first, weight = _program_inputs(kind)
        results[name] = _forward_backward(program, first.requires_grad_(), weight.requires_grad_(), "eager",
                                          full=lambda t: t)
    return results


def dtensor_programs(rank: int, compiler: str | None) -> dict[str, Any]:
    """Each program of :data:`DTENSOR_PROGRAMS` on DTensors over a 2-rank CPU mesh (the first
    input sharded on dim 0 or replicated, a complex weight replicated), forward and backward
    (gradient of ``|out|.sum()``); ``compiler``: None (eager) or realify's inner compiler.
    Returns, per program, the full output and both full gradients, and how many graphs realify
    compiled."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (WORLD,))
    results = {}
    for name, (program, kind, placement) in DTENSOR_PROGRAMS.items():
        first, weight = _program_inputs(kind)
        a = distribute_tensor(first, mesh, [Shard(0) if placement == "shard" else Replicate()]).requires_grad_()
        w = distribute_tensor(weight, mesh, [Replicate()]).requires_grad_()
        results[name] = _forward_backward(program, a, w, compiler, full=lambda t: t.full_tensor())
    return results


def _program_inputs(kind: str) -> tuple[torch.Tensor, torch.Tensor]:
    """A program's first input (:func:`_dtensor_input`) and its complex weight, seeded alike
    wherever they are made."""
    torch.manual_seed(0)
    return _dtensor_input(kind), torch.randn(6, 5, dtype=torch.complex64)


def _forward_backward(program, a, w, compiler: str | None,
                      full: Callable[[torch.Tensor], torch.Tensor]) -> dict[str, Any]:
    """``program(a, w)`` (compiled by realify with ``compiler`` unless None) and the gradients
    of ``|out|.sum()``, as whole arrays (``full``: a DTensor's full tensor), with how many
    graphs realify compiled."""
    import realify

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    fn = program if compiler is None else realify.compile(program, inner=compiler)
    out = fn(a, w)
    out.abs().sum().backward()

    def array(t):
        return full(t).detach().numpy().copy()

    return {"out": array(out), "grads": [array(t.grad) if t.grad is not None else None for t in (a, w)],
            "graphs": int(torch._dynamo.utils.counters["realify"]["graphs"])}
