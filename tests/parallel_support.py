"""Workers for tests/test_tensor_parallel.py: tensor parallelism on complex layers, functional
collectives and DTensor redistributions of complex values, random complex programs over
sharded, replicated and partial DTensors, DDPOptimizer pieces of every kind, and per-block
compilation with FSDP2 and activation checkpointing. Each runs in the two gloo processes of
tests/distributed_support.py (``run_ranks``); results come back as NumPy arrays.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from distributed_support import WORLD, train

CF = torch.complex64


def _array(t: Any) -> Any:
    if t is None:
        return None
    if hasattr(t, "full_tensor"):
        t = t.full_tensor()
    return t.detach().numpy().copy()


def _compiled(fn: Callable, compiler: str | None) -> Callable:
    import realify

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    return fn if compiler is None else realify.compile(fn, inner=compiler)


# ---- tensor-parallel layers ---------------------------------------------------------------------


class ComplexAttention(nn.Module):
    """Complex Q/K/V projections, softmax of Re(Q K^H) / sqrt(d) per head, complex output
    projection. Head counts are taken from the local projections (``view(b, s, -1, d)``), so
    the same code runs on a column-parallel shard of the heads."""

    def __init__(self, dim: int = 16, head_dim: int = 4):
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim, dtype=CF) for _ in range(4))
        self.head_dim = head_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q, k, v = (proj(x).view(b, s, -1, self.head_dim).transpose(1, 2) for proj in (self.q, self.k, self.v))
        scores = (q @ k.conj().transpose(-2, -1)).real / math.sqrt(self.head_dim)
        y = F.softmax(scores, dim=-1).to(CF) @ v
        return self.o(y.transpose(1, 2).reshape(b, s, -1))


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(16, 16, dtype=CF), nn.Linear(16, 16, dtype=CF))


def _tp_model(name: str) -> tuple[nn.Module, dict, Callable[[torch.Tensor, Any], Any]]:
    """The model, its tensor-parallel plan, and how its input enters (the whole input on every
    rank, or its sequence shard)."""
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    torch.manual_seed(0)
    if name == "mlp":
        return _mlp(), {"0": ColwiseParallel(), "1": RowwiseParallel()}, lambda x, mesh: x
    if name == "attention":
        return ComplexAttention(), {p: ColwiseParallel() for p in "qkv"} | {"o": RowwiseParallel()}, lambda x, mesh: x
    # sequence parallel: the input sharded along the sequence, gathered into the column-parallel
    # layer; the row-parallel layer's partial sums reduce-scattered back along the sequence
    plan = {"0": ColwiseParallel(input_layouts=Shard(1)),
            "1": RowwiseParallel(output_layouts=Shard(1), use_local_output=False)}
    return _mlp(), plan, lambda x, mesh: _sequence_shard(x, mesh)


def _sequence_shard(x: torch.Tensor, mesh) -> torch.Tensor:
    from torch.distributed.tensor import DTensor, Shard

    local = x.detach().chunk(WORLD, dim=1)[mesh.get_local_rank()].clone()
    return DTensor.from_local(local, mesh, [Shard(1)]).detach().requires_grad_()  # a leaf: its .grad a DTensor


TP_MODELS = ("mlp", "attention", "sequence-parallel")


def _tp_input() -> torch.Tensor:
    torch.manual_seed(1)
    return torch.randn(2, 8, 16, dtype=CF)


def single_process_tp_reference(name: str) -> dict[str, Any]:
    """The model of :func:`tensor_parallel` in one process: output, input and parameter gradients."""
    model, _, _ = _tp_model(name)
    x = _tp_input().requires_grad_()
    out = model(x)
    out.abs().pow(2).sum().backward()
    return {"out": _array(out), "input_grad": _array(x.grad),
            "grads": {n: _array(p.grad) for n, p in model.named_parameters()}}


def tensor_parallel(rank: int, name: str, compiler: str | None) -> dict[str, Any]:
    """The model parallelized over a 2-rank mesh, forward and backward (loss ``sum |out|^2``),
    compiled by realify with ``compiler`` (None: eager tensor parallelism)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import parallelize_module

    mesh = init_device_mesh("cpu", (WORLD,))
    model, plan, enter = _tp_model(name)
    parallelize_module(model, mesh, plan)
    x = _tp_input().requires_grad_()
    argument = enter(x, mesh)
    out = _compiled(model, compiler)(argument)
    loss = out.abs().pow(2).sum()
    (loss.full_tensor() if hasattr(loss, "full_tensor") else loss).backward()
    input_grad = argument.grad if argument is not x else x.grad
    return {"out": _array(out), "input_grad": _array(input_grad),
            "grads": {n: _array(p.grad) for n, p in model.named_parameters()},
            "graphs": int(torch._dynamo.utils.counters["realify"]["graphs"])}


# ---- collectives and redistributions --------------------------------------------------------------


def _collective_programs(mesh, pairs_for_eager: bool) -> dict[str, tuple[Callable, Any, bool]]:
    """Each functional collective, and each DTensor redistribution, of a complex value: per name,
    the program, the placement its argument enters with (None: a plain tensor, each rank's own)
    and whether its gradient is compared. The plain collectives have no derivative (eager warns
    that backpropagating through them "may lead to silently incorrect behavior"): their values
    are compared; their ``*_autograd`` forms and DTensor's redistributions have one, and their
    gradients are compared too. ``pairs_for_eager``: all-to-all and the differentiable all-gather on
    ``view_as_real`` pairs, for eager, whose all-to-all over gloo refuses complex tensors ("Invalid
    scalar type") and whose differentiable all-gather of a complex tensor returns a complex view of
    the real buffer gloo writes from its own thread: when that write lands before autograd wraps
    the view, eager raises "its base ... has been modified inplace" (seen under load)."""
    import torch.distributed._functional_collectives as funcol
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard

    def on_pairs(collective):
        if not pairs_for_eager:
            return collective
        return lambda x, *args: torch.view_as_complex(collective(torch.view_as_real(x), *args))

    all_to_all = on_pairs(funcol.all_to_all_single)
    all_to_all_autograd = on_pairs(funcol.all_to_all_single_autograd)
    all_gather_autograd = on_pairs(funcol.all_gather_tensor_autograd)
    wait = funcol.wait_tensor
    return {
        "all_reduce": (lambda x: funcol.all_reduce(x * 2, "sum", mesh).exp(), None, False),
        "all_reduce_avg": (lambda x: funcol.all_reduce(x.conj(), "avg", mesh) * x, None, False),
        "all_gather": (lambda x: funcol.all_gather_tensor(x.sin(), 0, mesh) * 1j, None, False),
        "reduce_scatter": (lambda x: funcol.reduce_scatter_tensor(x * x, "sum", 0, mesh).tanh(), None, False),
        "all_to_all": (lambda x: all_to_all(x + 1j, None, None, mesh) * x, None, False),
        "broadcast": (lambda x: funcol.broadcast(x.exp(), 1, mesh) + x, None, False),
        "all_gather_autograd": (lambda x: wait(all_gather_autograd(x.sin(), 0, mesh)) * 1j, None, True),
        "reduce_scatter_autograd": (lambda x: wait(funcol.reduce_scatter_tensor_autograd(x * x, "sum", 0, mesh)).tanh(),
                                    None, True),
        "all_to_all_autograd": (lambda x: wait(all_to_all_autograd(x + 1j, None, None, mesh)) * x, None, True),
        "partial-to-replicate": (lambda d: (d * (1 - 1j)).redistribute(mesh, [Replicate()]).to_local().exp(), Partial(),
                                 True),
        "partial-to-shard": (lambda d: d.cos().redistribute(mesh, [Shard(0)]).to_local() * 2j, Partial(), True),
        "shard-to-replicate": (lambda d: d.exp().redistribute(mesh, [Replicate()]).to_local(), Shard(0), True),
        "replicate-to-shard": (lambda d: (d * 3).redistribute(mesh, [Shard(1)]).to_local().sin(), Replicate(), True),
        "shard-to-shard": (lambda d: (d * (1 + 1j)).redistribute(mesh, [Shard(1)]).to_local() * 2j, Shard(0), True),
        # a DTensor the program makes itself, from a plain tensor
        "partial-made-inside": (lambda x: DTensor.from_local(x * 2, mesh, [Partial()], run_check=False)
                                .redistribute(mesh, [Replicate()]).to_local().exp(), None, True),
    }


COLLECTIVES = ("all_reduce", "all_reduce_avg", "all_gather", "reduce_scatter", "all_to_all", "broadcast",
               "all_gather_autograd", "reduce_scatter_autograd", "all_to_all_autograd", "partial-to-replicate",
               "partial-to-shard", "shard-to-replicate", "replicate-to-shard", "shard-to-shard", "partial-made-inside")


def collectives(rank: int, compiler: str | None) -> dict[str, Any]:
    """Every program of :func:`_collective_programs` on rank-specific complex values (4 x 4; a
    DTensor's local part where it takes one): per program, the output and, where compared, the
    gradient of ``sum |out|``, gathered from both ranks."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor

    mesh = init_device_mesh("cpu", (WORLD,))
    results = {}
    for name, (program, placement, differentiable) in _collective_programs(mesh, compiler is None).items():
        torch.manual_seed(10 + rank)
        x = torch.randn(4, 4, dtype=CF, requires_grad=differentiable)
        argument = x if placement is None else DTensor.from_local(x, mesh, [placement], run_check=False)
        out = _compiled(program, compiler)(argument)
        results[name] = {"out": _gathered(dist, out)}
        if differentiable:
            out.abs().sum().backward()
            results[name]["grad"] = _gathered(dist, x.grad)
    return results


def _gathered(dist, t: torch.Tensor) -> np.ndarray:
    parts = [torch.empty_like(t) for _ in range(WORLD)]
    dist.all_gather(parts, t.detach().contiguous())
    return torch.stack(parts).numpy().copy()


# ---- random complex programs over DTensors --------------------------------------------------------

PLACEMENTS = ("shard0", "shard1", "replicate", "partial")


def random_dtensor_program(seed: int) -> tuple[list[str], list[str]]:
    """A program of 3-6 ops over two complex DTensors ``a``, ``b`` (4 x 4) whose placements it
    draws, and those placements. Ops: elementwise functions, products and sums, matrix products,
    reductions, transposes, conjugation and redistributions; linear ops keep a ``Partial``
    pending, nonlinear ones make DTensor reduce it first."""
    rng = random.Random(seed)
    placements = [rng.choice(PLACEMENTS) for _ in range(2)]
    names, lines = ["a", "b"], []
    for i in range(rng.randint(3, 6)):
        x, y = rng.choice(names), rng.choice(names)
        expr = rng.choice([
            f"{x} * {y}", f"{x} + {y} * (0.5 - 1j)", f"{x} - {y}.conj()", f"({x} * 1j).exp()", f"{x}.sin()",
            f"{x} @ {y}", f"{x}.mT @ {y}", f"{x}.sum(0, keepdim=True) * {y}", f"{x} * 2.5",
            f"{x}.redistribute(mesh, [Replicate()])", f"{x}.redistribute(mesh, [Shard(0)])",
            f"{x}.redistribute(mesh, [Shard(1)]) * (1 + 2j)", f"{x}.abs() * {y}",
        ])
        name = f"v{i}"
        lines.append(f"{name} = {expr}")
        names.append(name)
    return [*lines, f"return {names[-1]}.redistribute(mesh, [Replicate()]).to_local()"], placements


def dtensor_random_programs(rank: int, seeds: list[int], compiler: str | None) -> dict[int, Any]:
    """Each :func:`random_dtensor_program` on DTensors made from the same global values on both
    ranks (a Partial from a rank-specific split of them), forward and backward; per seed, the
    output and the full gradients of both inputs."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (WORLD,))
    results = {}
    for seed in seeds:
        lines, placements = random_dtensor_program(seed)
        namespace = {"mesh": mesh, "Replicate": Replicate, "Shard": Shard, "torch": torch}
        exec("def program(a, b):\n" + "\n".join("    " + line for line in lines), namespace)
        torch.manual_seed(seed)
        values = [torch.randn(4, 4, dtype=CF) for _ in range(2)]
        inputs = []
        for value, placement in zip(values, placements):
            if placement == "partial":  # rank-specific summands of the same global value
                share = value * (0.25 if rank == 0 else 0.75)
                inputs.append(DTensor.from_local(share, mesh, [Partial()], run_check=False))
            else:
                layout = {"shard0": Shard(0), "shard1": Shard(1), "replicate": Replicate()}[placement]
                inputs.append(distribute_tensor(value, mesh, [layout]))
        leaves = [x.detach().requires_grad_() for x in inputs]
        out = _compiled(namespace["program"], compiler)(*leaves)
        out.abs().sum().backward()
        results[seed] = {"out": _array(out), "grads": [_array(x.grad) for x in leaves]}
    return results


# ---- DDPOptimizer pieces of every kind ------------------------------------------------------------


class _Lift(nn.Module):
    """Real only: a piece with no complex value."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(2, 8)

    def forward(self, x):
        return self.linear(x).permute(0, 3, 1, 2)


class _SpectralPiece(nn.Module):
    """rfft2, the low modes of two corners mixed by complex weights and written into a zero
    spectrum by slice assignment, irfft2: pieces that return a slice of the spectrum with the
    spectrum (outputs that view other outputs) and a fresh complex tensor the next piece writes."""

    def __init__(self, c: int = 8, m: int = 3):
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(c, c, m, m, dtype=CF) * 0.1)
        self.w2 = nn.Parameter(torch.randn(c, c, m, m, dtype=CF) * 0.1)
        self.linear = nn.Linear(c, c)
        self.m = m

    def forward(self, h):
        z = torch.fft.rfft2(h)
        m = self.m
        out = torch.zeros_like(z)
        out[:, :, :m, :m] = torch.einsum("bixy,ioxy->boxy", z[:, :, :m, :m], self.w1)
        out[:, :, -m:, :m] = torch.einsum("bixy,ioxy->boxy", z[:, :, -m:, :m], self.w2)
        y = torch.fft.irfft2(out, s=h.shape[-2:])
        return F.gelu(y + self.linear(h.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)), z


class _Tracker(nn.Module):
    """A running mean of the input written in place under no_grad (an input the piece only
    writes), then a graph break."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.zeros(8, dtype=CF))
        self.scale = nn.Parameter(torch.ones(8))

    def forward(self, h, z):
        with torch.no_grad():
            self.mean.mul_(0.9).add_(z.mean(dim=(0, 2, 3)) * 0.1)
        torch._dynamo.graph_break()
        return h * self.scale[:, None, None]


class PieceModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.lift = _Lift()
        self.block1 = _SpectralPiece()
        self.tracker = _Tracker()
        self.block2 = _SpectralPiece()
        self.head = nn.Linear(8, 1)
        self.mix = nn.Parameter(torch.randn(8, dtype=CF) * 0.1)

    def forward(self, x):
        h = self.lift(x)
        h, z = self.block1(h)  # z only passes through to the head
        h = self.tracker(h, z)
        h, _ = self.block2(h)
        passed = (z.mean(dim=(2, 3)) * self.mix).abs().sum()
        return self.head(h.permute(0, 2, 3, 1)).squeeze(-1) + passed


def ddp_pieces(rank: int, compiler: str | None, steps: int = 3) -> dict[str, Any]:
    """``steps`` SGD steps of DDP over :class:`PieceModel`, DDPOptimizer splitting its graphs at
    every bucket (small buckets), on rank-specific data."""
    torch.manual_seed(0)
    model = PieceModel()
    torch.distributed._DEFAULT_FIRST_BUCKET_BYTES = 1024
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.001)
    torch._dynamo.config.optimize_ddp = True
    losses = train(rank, _compiled(ddp, compiler), torch.optim.SGD(model.parameters(), lr=0.05), steps,
                   batch=lambda: torch.randn(2, 16, 16, 2))
    return {"losses": losses, "parameters": [_array(p) for p in model.parameters()],
            "buffers": [_array(b) for b in model.buffers()],
            "graphs": int(torch._dynamo.utils.counters["realify"]["graphs"])}


# ---- per-block compile with FSDP2 and activation checkpointing ------------------------------------


class _CheckpointedBlock(nn.Module):
    def __init__(self, dim: int = 16):
        super().__init__()
        self.inner = nn.Sequential(nn.Linear(dim, dim, dtype=CF), nn.Linear(dim, dim, dtype=CF))

    def forward(self, x):
        from torch.utils.checkpoint import checkpoint

        return x + checkpoint(lambda y: self.inner(y).tanh(), x, use_reentrant=False)


def per_block_fsdp(rank: int, compiler: str | None, steps: int = 3) -> dict[str, Any]:
    """A stack of residual complex blocks, each with activation checkpointing, each sharded by
    FSDP2 and compiled on its own (``block.compile(backend=...)``, as torchtitan compiles a
    transformer's layers); Adam on rank-specific data."""
    import functools

    from torch.distributed.fsdp import fully_shard

    import realify

    torch.manual_seed(0)
    blocks = nn.ModuleList(_CheckpointedBlock() for _ in range(3))
    for block in blocks:
        fully_shard(block)
    root = nn.Sequential(*blocks)
    fully_shard(root)
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    if compiler is not None:
        backend = functools.partial(realify.realify_backend, inner=compiler)
        for block in blocks:
            block.compile(backend=backend)
    losses = train(rank, root, torch.optim.Adam(root.parameters(), lr=0.01), steps,
                   batch=lambda: torch.randn(4, 16, dtype=CF))
    return {"losses": losses, "parameters": {n: _array(p) for n, p in root.named_parameters()},
            "graphs": int(torch._dynamo.utils.counters["realify"]["graphs"])}


# ---- 2-D: FSDP2 over tensor parallelism -----------------------------------------------------------


def fsdp_over_tp(rank: int, compiler: str | None, steps: int = 3) -> dict[str, Any]:
    """The tensor-parallel MLP on the "tp" dimension of a (1, 2) mesh, sharded by FSDP2 over its
    "dp" dimension (two processes allow no more data-parallel ranks: the FSDP2 code path on a
    dimension of one), Adam steps on the same data on both ranks."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = init_device_mesh("cpu", (1, WORLD), mesh_dim_names=("dp", "tp"))
    torch.manual_seed(0)
    model = _mlp()
    parallelize_module(model, mesh["tp"], {"0": ColwiseParallel(), "1": RowwiseParallel()})
    fully_shard(model, mesh=mesh["dp"])
    losses = train(rank, _compiled(model, compiler), torch.optim.Adam(model.parameters(), lr=0.01), steps,
                   batch=lambda: torch.randn(2, 8, 16, dtype=CF), seed=100)
    return {"losses": losses, "parameters": {n: _array(p) for n, p in model.named_parameters()},
            "graphs": int(torch._dynamo.utils.counters["realify"]["graphs"])}
