"""The benchmark runner: every workload x mode in one process, timed and checked against eager.

For each workload variant (forward, or a training step) the runner builds a fresh copy of
the model and inputs from the same seed for every mode, so that all modes see identical
parameters and data. One mode at a time:

1. ``torch._dynamo.reset()``, then compile (lazily: the first call compiles);
2. the first call is timed on its own and reported as the compile time; its result (outputs,
   or for training the loss and every gradient) is compared with eager's first call;
3. ``warmup`` further calls are discarded, then ``repeat`` calls are timed one by one:
   median, min and max are reported.

The speedup of a compiled mode is measured side by side: each of its timed calls alternates
with a call of eager PyTorch on its own fresh copy of the model and inputs, and the speedup is
the ratio of the two medians. A machine whose speed drifts over minutes (shared VMs, thermal
limits) then moves both medians together, where a ratio of medians taken minutes apart would
carry the drift.

A timed call is the whole call a user makes: complex inputs in, complex outputs out (layout
conversion at the boundary included). A training call is ``loss = f(*inputs)``,
``loss.backward()`` and, for modules, an SGD step; forward calls run under ``torch.no_grad``.
No mode may silently run eagerly: dynamo's recompile limit is raised and hitting it is an
error, and a compiled mode that captured no graph is reported as failed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import torch
import torch.nn as nn
from torch.utils._pytree import tree_leaves

from . import workloads as _workloads
from .workloads import Workload

log = logging.getLogger("realify.bench")


# --------------------------------------------------------------------------- modes
@dataclasses.dataclass(frozen=True)
class Mode:
    """How a workload is run: ``wrap(fn)`` gives the callable, ``context()`` stays active
    around every call (compilation happens lazily at the first call)."""

    name: str
    description: str
    owner: str  # whose code runs the workload in this mode (a failure is theirs)
    wrap: Callable[[Callable], Callable]
    context: Callable[[], AbstractContextManager] = contextlib.nullcontext
    gemm_only: bool = False  # only for workloads with complex GEMM/convolution
    compiled: bool = True
    hidden: bool = False  # not run by default (used by tests)
    # each call (not the backward) under torch.autocast(<device>, dtype=bfloat16); results are
    # checked against eager's float32 ones with ``rtol`` at least (bfloat16 keeps 8 bits)
    autocast: bool = False
    rtol: float | None = None


def _realify(inner: str) -> Callable[[Callable], Callable]:
    def wrap(fn: Callable) -> Callable:
        import realify

        return realify.compile(fn, inner=inner)

    return wrap


def _complex_autocast() -> AbstractContextManager:
    import realify

    return realify.config.patch(complex_autocast=True)


def low_precision_unavailable(device: str) -> str | None:
    """Why bfloat16 GEMMs would not pay on ``device`` (None where they do): a CPU without
    bfloat16 instructions (AVX-512 BF16, AMX) runs them in a scalar fallback, tens to hundreds
    of times slower than float32 (docs/numerics.md, "Complex mixed precision")."""
    if torch.device(device).type != "cpu" or torch.ops.mkldnn._is_mkldnn_bf16_supported():
        return None
    if os.environ.get("REALIFY_BENCH_SLOW_BFLOAT16"):
        return None
    return ("this CPU has no bfloat16 GEMM instructions (AVX-512 BF16 or AMX; PyTorch reports "
            f"{torch.backends.cpu.get_cpu_capability()}): bfloat16 products run a scalar fallback, tens to "
            "hundreds of times slower than float32; set REALIFY_BENCH_SLOW_BFLOAT16=1 to run it anyway")


def _gemm4() -> AbstractContextManager:
    import realify

    return realify.config.patch(gemm_multiplications=4)


MODES: dict[str, Mode] = {m.name: m for m in [
    Mode("eager", "plain PyTorch on complex tensors, no compilation", "eager PyTorch", lambda fn: fn,
         compiled=False),
    Mode("inductor", "torch.compile(fn): default backend (Inductor), complex ops as PyTorch handles them",
         "torch.compile's default backend (PyTorch)", torch.compile),
    Mode("complex-wrapper", "torch.compile(fn) under torch._functorch.config.patch(enable_complex_wrapper=True)",
         "PyTorch's experimental complex wrapper (enable_complex_wrapper), not realify", torch.compile,
         lambda: torch._functorch.config.patch(enable_complex_wrapper=True)),
    Mode("realify", "realify.compile(fn, inner='inductor'): real-only graph, 3-multiplication complex GEMM",
         "realify", _realify("inductor")),
    Mode("realify-4m", "realify with realify.config.patch(gemm_multiplications=4) (GEMM/convolution workloads only)",
         "realify", _realify("inductor"), _gemm4, gemm_only=True),
    # bfloat16 keeps 8 significant bits (unit roundoff 2^-8 = 3.9e-3); layers and a loss
    # compound it: measured 4e-3 to 3.7e-2 (complextorch's CNN's gradients, through two
    # convolutions, two activations and a cross-entropy); 0.1 still flags a wrong result (a
    # lost or doubled term is O(1))
    Mode("realify-amp", "realify under torch.autocast(dtype=torch.bfloat16) with realify.config.complex_autocast: "
         "complex GEMMs/convolutions on bfloat16 parts (GEMM/convolution workloads only)",
         "realify", _realify("inductor"), _complex_autocast, gemm_only=True, autocast=True, rtol=0.1),
    # fast modes for tests: no Inductor code generation
    Mode("aot-eager", "torch.compile(fn, backend='aot_eager')", "torch.compile's aot_eager backend (PyTorch)",
         lambda fn: torch.compile(fn, backend="aot_eager"), hidden=True),
    Mode("realify-eager", "realify.compile(fn, inner='eager'): the real graph run by the FX interpreter",
         "realify", _realify("eager"), hidden=True),
]}
DEFAULT_MODES = tuple(name for name, m in MODES.items() if not m.hidden)


# --------------------------------------------------------------------------- results
@dataclasses.dataclass
class Row:
    """One workload variant under one mode. Times in milliseconds, compile time in seconds."""

    workload: str
    variant: str  # "fwd" or "train"
    mode: str
    size: str
    status: str  # "ok", "wrong" (result differs from eager), "failed", "skipped" (package not installed)
    error: str | None = None
    median_ms: float | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    repeat: int = 0
    compile_s: float | None = None  # first call (compilation + one run)
    decompose_s: float | None = None  # realify's share of compile_s (the rest is Inductor's)
    speedup: float | None = None  # eager median / this median (eager_paired_ms when measured)
    eager_paired_ms: float | None = None  # eager's median over calls alternating with this mode's
    max_rel_err: float | None = None  # normwise, worst output/gradient, vs eager
    rtol: float | None = None
    graphs: int | None = None  # graphs dynamo compiled
    graph_breaks: int | None = None
    notes: list[str] = dataclasses.field(default_factory=list)
    # the form each complex GEMM took under realify ("3m (measured)": count), from the
    # compile backend's choices (realify/passes/gemm_form.py)
    gemm_forms: dict[str, int] = dataclasses.field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.workload} {self.variant}"

    def status_text(self) -> str:
        if self.status == "failed":
            return f"FAILED: {self.error}"
        if self.status == "skipped":
            return f"skipped: {self.error}"
        text = "ok" if self.status == "ok" else f"WRONG (> {self.rtol:g})"
        return f"{text} ({'; '.join(self.notes)})" if self.notes else text

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Case:
    """A workload variant to run."""

    workload: Workload
    train: bool

    @property
    def variant(self) -> str:
        return "train" if self.train else "fwd"


def select(only: Iterable[str] | None = None, train: bool = False) -> list[Case]:
    """The cases to run: every workload's forward variant (and training variant if ``train``),
    restricted to the workloads named in ``only``."""
    chosen = list(_workloads.WORKLOADS.values())
    if only:
        wanted = [n.strip() for name in only for n in name.split(",") if n.strip()]
        for n in wanted:
            _workloads.get(n)  # raises with the list of valid names
        chosen = [w for w in chosen if w.name in wanted]
    cases = []
    for w in chosen:
        cases.append(Case(w, False))
        if train and w.trainable:
            cases.append(Case(w, True))
    return cases


def modes_for(case: Case, modes: Sequence[str]) -> list[Mode]:
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise ValueError(f"unknown mode(s) {', '.join(unknown)}; modes are {', '.join(MODES)}")
    return [MODES[m] for m in modes if not MODES[m].gemm_only or case.workload.gemm]


# --------------------------------------------------------------------------- running
def run(cases: Sequence[Case], *, size: str = "small", modes: Sequence[str] = DEFAULT_MODES, repeat: int = 10,
        warmup: int = 2, device: str = "cpu", seed: int = 0, cold: bool = True, progress: bool = True,
        on_row: Callable[[Row], None] | None = None) -> list[Row]:
    """Run every case under every mode (eager always first: it is the reference).

    ``cold`` turns off Inductor's and AOTAutograd's on-disk caches, so that the compile
    time is that of a first run on a fresh machine."""
    modes = list(modes)
    if "eager" in modes:
        modes.remove("eager")
    modes.insert(0, "eager")
    plan = [(case, mode) for case in cases for mode in modes_for(case, modes)]
    bar = _progress(len(plan), progress)
    rows: list[Row] = []
    reference: Any = None
    eager_ms: float | None = None
    try:
        for case, mode in plan:
            bar.set_description(f"{case.workload.name} {case.variant} {mode.name}")
            if mode.name == "eager":
                reference = eager_ms = None
            row, result = run_one(case, mode, size=size, repeat=repeat, warmup=warmup, device=device, seed=seed,
                                  reference=reference, cold=cold)
            if mode.name == "eager":
                reference, eager_ms = result, row.median_ms
            elif reference is None and row.status != "failed":
                row.notes.append("no eager reference")
            baseline = row.eager_paired_ms or eager_ms
            if row.median_ms and baseline:
                row.speedup = baseline / row.median_ms
            rows.append(row)
            if on_row is not None:
                with bar.external_write_mode():  # the bar steps aside while the row prints
                    on_row(row)
            bar.update(1)
    finally:
        bar.close()
    return rows


def run_one(case: Case, mode: Mode, *, size: str, repeat: int = 10, warmup: int = 2, device: str = "cpu",
            seed: int = 0, reference: Any = None, cold: bool = True) -> tuple[Row, Any]:
    """One case under one mode: returns the row and the first call's result (outputs/grads)."""
    w = case.workload
    row = Row(w.name, case.variant, mode.name, size, "ok", rtol=max(w.rtol, mode.rtol or 0.0))
    if mode.autocast and (reason := low_precision_unavailable(device)):
        row.status, row.error = "skipped", reason
        return row, None
    torch._dynamo.reset()
    counters = torch._dynamo.utils.counters
    counters.clear()
    sync = torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)
    result = None
    with _Capture() as captured, _dynamo_limits(), _caches(not cold), mode.context():
        try:
            fn, inputs = w.make(size, case.train, device=device, seed=seed)
            call = mode.wrap(fn)
            step = _step(_under_autocast(call, device) if mode.autocast else call, fn, inputs, case.train)
            sync()
            t0 = time.perf_counter()
            result = step()
            sync()
            row.compile_s = time.perf_counter() - t0
            if counters["realify"]["decompose_s"]:
                row.decompose_s = counters["realify"]["decompose_s"]
            row.gemm_forms = dict(counters["realify_gemm_form"])
            if mode.compiled:
                row.graphs = int(counters["stats"]["unique_graphs"])
                row.graph_breaks = int(sum(counters["graph_break"].values()))
                if row.graphs == 0:
                    raise RuntimeError("no graph was compiled: the mode fell back to eager")
            if reference is not None:
                row.max_rel_err = max_rel_err(result, reference)
                if not row.max_rel_err <= row.rtol:
                    row.status = "wrong"
            eager_step = None
            if mode.compiled:
                eager_fn, eager_inputs = w.make(size, case.train, device=device, seed=seed)
                eager_step = _step(eager_fn, eager_fn, eager_inputs, case.train)
            for _ in range(warmup):
                step()
                if eager_step is not None:
                    eager_step()
            times, eager_times = [], []
            for _ in range(repeat):
                times.append(_timed(step, sync))
                if eager_step is not None:
                    eager_times.append(_timed(eager_step, sync))
            row.median_ms, row.min_ms, row.max_ms = statistics.median(times), min(times), max(times)
            if eager_times:
                row.eager_paired_ms = statistics.median(eager_times)
            row.repeat = repeat
            if mode.compiled:
                recompiled = int(counters["stats"]["unique_graphs"]) - row.graphs
                if recompiled:
                    row.notes.append(f"{recompiled} recompile(s) after the first call")
        except _workloads.WorkloadUnavailable as e:
            row.status, row.error = "skipped", str(e)
        except Exception as e:
            row.status, row.error = "failed", one_line(e)
            log.info("%s %s under %s failed: %s", w.name, case.variant, mode.name, row.error)
    if row.graph_breaks:
        row.notes.append(f"{row.graph_breaks} graph break(s)")
    row.notes.extend(captured.notes())
    torch._dynamo.reset()
    return row, result


def _under_autocast(call: Callable, device: str) -> Callable:
    """``call`` under bfloat16 autocast; the backward of a training step runs outside it, as
    PyTorch's mixed-precision recipe has it."""
    def autocast_call(*args: Any) -> Any:
        with torch.autocast(torch.device(device).type, dtype=torch.bfloat16):
            return call(*args)
    return autocast_call


def _timed(call: Callable[[], Any], sync: Callable[[], None]) -> float:
    """Milliseconds of one call."""
    sync()
    t0 = time.perf_counter()
    call()
    sync()
    return (time.perf_counter() - t0) * 1e3


def _step(call: Callable, fn: Any, inputs: tuple, train: bool) -> Callable[[], Any]:
    """The user's call: forward under no_grad, or loss + backward (+ SGD step for modules)."""
    if not train:
        def forward() -> Any:
            with torch.no_grad():
                return call(*inputs)
        return forward

    params = list(fn.parameters()) if isinstance(fn, nn.Module) else []
    targets = params + [x for x in inputs if isinstance(x, torch.Tensor) and x.requires_grad]
    optimizer = torch.optim.SGD(params, lr=1e-4) if params else None

    def train_step() -> Any:
        for t in targets:
            t.grad = None
        loss = call(*inputs)
        loss.backward()
        result = (loss.detach(), [t.grad for t in targets])
        if optimizer is not None:
            optimizer.step()
        return result
    return train_step


def max_rel_err(result: Any, reference: Any) -> float:
    """Worst normwise relative error over all tensors: ``max|x - ref| / max|ref|``."""
    got = [x for x in tree_leaves(result) if isinstance(x, torch.Tensor)]
    ref = [x for x in tree_leaves(reference) if isinstance(x, torch.Tensor)]
    if len(got) != len(ref):
        return float("inf")
    worst = 0.0
    for x, r in zip(got, ref):
        if x.shape != r.shape or x.dtype.is_complex != r.dtype.is_complex:
            return float("inf")
        x, r = x.detach().to(torch.complex128 if x.dtype.is_complex else torch.float64), r.detach().to(x.device)
        r = r.to(x.dtype)
        x_nan, r_nan = torch.isnan(x), torch.isnan(r)
        if not torch.equal(x_nan, r_nan):
            return float("inf")
        x, r = torch.where(x_nan, 0, x), torch.where(r_nan, 0, r)
        if r.numel() == 0:
            continue
        scale = r.abs().max().item()
        diff = (x - r).abs().max().item()
        if math.isnan(diff):  # inf - inf
            return float("inf")
        worst = max(worst, diff / scale if scale > 0 else diff)
    return worst


def one_line(e: BaseException) -> str:
    """``Type: first line`` of the innermost cause of ``e`` (dynamo wraps backend errors)."""
    seen = set()
    while id(e) not in seen:
        seen.add(id(e))
        inner = getattr(e, "inner_exception", None) or e.__cause__
        if inner is None:
            break
        e = inner
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    text = f"{type(e).__name__}: {lines[0] if lines else ''}".rstrip(": ")
    return text if len(text) <= 300 else text[:297] + "..."


@contextlib.contextmanager
def _dynamo_limits():
    """Enough recompiles for every workload, and an error instead of an eager fallback."""
    cfg = torch._dynamo.config
    with cfg.patch(recompile_limit=64, accumulated_recompile_limit=4096, fail_on_recompile_limit_hit=True,
                   suppress_errors=False):
        yield


@contextlib.contextmanager
def _caches(enabled: bool):
    """Inductor's FX graph cache and AOTAutograd's cache on or off."""
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    with inductor_config.patch(fx_graph_cache=enabled), functorch_config.patch(enable_autograd_cache=enabled):
        yield


class _Capture(logging.Handler):
    """Collects realify's warnings (eager islands) while a mode runs."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())

    def __enter__(self):
        logging.getLogger("realify").addHandler(self)
        return self

    def __exit__(self, *exc):
        logging.getLogger("realify").removeHandler(self)
        return False

    def notes(self) -> list[str]:
        notes = []
        for msg in self.messages:
            msg = msg.removeprefix("realify: ").strip()
            if msg and msg not in notes:
                notes.append(msg)
        return notes


def _progress(total: int, enabled: bool):
    """A progress bar on a terminal's stderr; none where stderr is a pipe or a file (a bar
    there is a stream of carriage-return frames glued to the results)."""
    import sys

    try:
        from tqdm import tqdm
    except ImportError:  # tqdm is in the "bench" extra
        enabled = False
    if not enabled or not sys.stderr.isatty():
        return _NoBar()
    return tqdm(total=total, file=sys.stderr, unit="run", dynamic_ncols=True, leave=False)


class _NoBar:
    def set_description(self, _: str) -> None:
        pass

    def update(self, _: int) -> None:
        pass

    def close(self) -> None:
        pass

    def external_write_mode(self) -> AbstractContextManager:
        return contextlib.nullcontext()


# --------------------------------------------------------------------------- demo
DEMO: tuple[tuple[str, bool], ...] = (("docs-chain", False), ("rotary", True), ("cnn", True), ("fno", False))


def demo(*, size: str = "small", repeat: int = 5, device: str = "cpu", cold: bool = True, progress: bool = True,
         on_row: Callable[[Row], None] | None = None) -> list[Row]:
    """The demo selection through eager and ``backend="realify"``."""
    cases = [Case(_workloads.get(name), train) for name, train in DEMO]
    return run(cases, size=size, modes=("eager", "realify"), repeat=repeat, warmup=1, device=device,
               cold=cold, progress=progress, on_row=on_row)
