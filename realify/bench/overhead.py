"""Per-call cost: ``python -m realify bench --overhead``.

On tiny workloads a compiled call costs what its wrappers cost, not what its kernels do. This
measures, for each workload, eager PyTorch, ``torch.compile``'s default backend (Inductor) and
``realify.compile`` (Inductor), and the layers of both compiled calls, by calling the objects
each layer wraps directly:

- ``realify.compile``'s wrapper, which re-raises realify's errors out of dynamo's
  (:func:`realify.backend._raising_realify_errors`);
- dynamo: the frame entry, the guards, the call of the graph's compiled function;
- realify's options check (``_CompiledUnderOptions`` in realify/backend.py);
- ``RealCall``: complex inputs into (re, im) pairs, outputs back into complex tensors;
- AOTAutograd's runtime wrapper (with dynamo's ``disable`` around Inductor's result);
- Inductor's compiled graph (``CompiledFxGraph``), whose generated code runs the kernels.

The objects are those the timed calls run: the backend is wrapped to keep what it returns,
which dynamo calls as it is. Every callable is called in turn, one call each per round, for
``calls`` rounds, in one process, so that a machine whose speed drifts moves all of them
together; a layer's cost is the difference of two medians (it can come out slightly negative
where a layer costs less than the noise). Forward calls run under ``torch.no_grad``; a training
step (loss, backward, and an SGD step for modules) is timed whole.
"""

from __future__ import annotations

import dataclasses
import functools
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from . import runner
from .workloads import Workload

C64 = torch.complex64


def mul_add(z: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``z * w + z``: the smallest complex program, whose compiled call is all overhead."""
    return z * w + z


def _build_mul_add(n: int, train: bool):
    return mul_add, (torch.randn(n, dtype=C64), torch.randn(n, dtype=C64))


MUL_ADD = Workload("mul-add", "z * w + z on complex64 vectors", _build_mul_add,
                   {"tiny": {"n": 16}, "small": {"n": 1 << 16}, "large": {"n": 1 << 20}})
# cheap to compile at their tiny size, one graph each
DEFAULT_WORKLOADS = ("mul-add", "rotary", "docs-chain", "gemm-256", "quantum")


def workload(name: str) -> Workload:
    """The workload ``name``: ``mul-add``, or one of the bench's."""
    return MUL_ADD if name == MUL_ADD.name else runner._workloads.get(name)


def select(only: Sequence[str] | None = None, train: bool = False) -> list[runner.Case]:
    """The cases to measure: forward variants of ``only`` (default :data:`DEFAULT_WORKLOADS`),
    and their training steps where ``train`` and the workload trains."""
    names = [n.strip() for name in (only or DEFAULT_WORKLOADS) for n in name.split(",") if n.strip()]
    cases = []
    for name in names:
        w = workload(name)
        cases.append(runner.Case(w, False))
        if train and w.trainable:
            cases.append(runner.Case(w, True))
    return cases


# what each measured callable is, in the order of the table: (key, label)
CALLS = (
    ("eager", "eager"),
    ("default", "torch.compile (default backend, Inductor)"),
    ("default.backend", "  its backend's result, called directly"),
    ("default.graph", "  Inductor's compiled graph, called directly"),
    ("realify", "realify.compile (Inductor)"),
    ("realify.dynamo", "  the torch.compile'd function inside, called directly"),
    ("realify.backend", "  realify_backend's result, called directly"),
    ("realify.realcall", "  its RealCall, called directly"),
    ("realify.program", "  the compiled real program, called on pairs"),
    ("realify.graph", "  Inductor's compiled graph, called directly"),
)
# each layer's cost: the median of the first minus that of the second
LAYERS = (
    ("default", "dynamo: frame entry, guards, graph call", "default", "default.backend"),
    ("default", "AOTAutograd's runtime wrapper", "default.backend", "default.graph"),
    ("default", "Inductor's compiled graph", "default.graph", None),
    ("realify", "realify.compile's error wrapper", "realify", "realify.dynamo"),
    ("realify", "dynamo: frame entry, guards, graph call", "realify.dynamo", "realify.backend"),
    ("realify", "realify's options check", "realify.backend", "realify.realcall"),
    ("realify", "RealCall's conversions", "realify.realcall", "realify.program"),
    ("realify", "AOTAutograd's runtime wrapper", "realify.program", "realify.graph"),
    ("realify", "Inductor's compiled graph", "realify.graph", None),
)


@dataclasses.dataclass
class Overhead:
    """One workload variant's per-call medians, in microseconds.

    Attributes
    ----------
    workload, variant, size : str
        What was measured (``variant`` is ``"fwd"`` or ``"train"``).
    calls : int
        Calls of each callable (alternating).
    us : dict of str to float
        Median microseconds per call of each callable of :data:`CALLS` that was measured.
    notes : list of str
        Why a callable was not measured, where one was not.
    """

    workload: str
    variant: str
    size: str
    calls: int
    us: dict[str, float] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)

    def layer(self, top: str, below: str | None) -> float | None:
        """``us[top] - us[below]`` (``us[top]`` where ``below`` is None); None where one is missing."""
        if top not in self.us or (below is not None and below not in self.us):
            return None
        return self.us[top] - (self.us[below] if below is not None else 0.0)

    def not_kernels(self, mode: str) -> float | None:
        """What a compiled call costs beyond Inductor's compiled graph (``mode``: default or realify)."""
        return self.layer(mode, f"{mode}.graph")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def measure(case: runner.Case, *, size: str = "tiny", calls: int = 2000, warmup: int = 20,
            seed: int = 0) -> Overhead:
    """Time ``case``'s calls and, for a forward variant, their layers (see the module docstring).

    Every callable is called once per round, for ``warmup`` untimed rounds and then ``calls``
    timed ones; each mode gets its own copy of the model and inputs, built from ``seed``.
    """
    from torch._inductor.compile_fx import compile_fx

    from ..backend import _raising_realify_errors, realify_backend

    result = Overhead(case.workload.name, case.variant, size, calls)
    returned: dict[str, Any] = {}

    def keeping(mode: str, backend: Callable) -> Callable:
        """``backend``, keeping what it returns (dynamo calls that object itself)."""
        def compile_graph(gm: torch.fx.GraphModule, example_inputs: list) -> Any:
            compiled = backend(gm, example_inputs)
            returned[mode] = None if mode in returned else compiled  # None: several graphs
            return compiled
        return compile_graph

    train = case.train
    callables: dict[str, Callable[[], Any]] = {}
    with runner._dynamo_limits(), runner._caches(False), torch.enable_grad() if train else torch.no_grad():
        torch._dynamo.reset()
        fn, inputs = case.workload.make(size, train, seed=seed)
        callables["eager"] = runner._step(fn, fn, inputs, train)
        for mode, backend in (("default", compile_fx), ("realify", functools.partial(realify_backend))):
            fn, inputs = case.workload.make(size, train, seed=seed)
            dynamo_compiled = torch.compile(fn, backend=keeping(mode, backend))
            # realify.compile(fn) is this: torch.compile with the backend, in its error wrapper
            compiled = _raising_realify_errors(dynamo_compiled) if mode == "realify" else dynamo_compiled
            callables[mode] = runner._step(compiled, fn, inputs, train)
            callables[mode]()  # compiles
            if mode == "realify" and not train:
                callables["realify.dynamo"] = runner._step(dynamo_compiled, fn, inputs, train)
        if not train:
            layers = _layers(returned, callables["realify"])
            if isinstance(layers, str):
                result.notes.append(f"layers not measured: {layers}")
            else:
                callables.update(layers)
        callables = {name: callables[name] for name, _ in CALLS if name in callables}
        for _ in range(warmup):
            for call in callables.values():
                call()
        times: dict[str, list[int]] = {name: [] for name in callables}
        clock = time.perf_counter_ns
        for _ in range(calls):
            for name, call in callables.items():
                call()  # the first call after another callable's runs on caches that one left
                t0 = clock()
                call()
                times[name].append(clock() - t0)
    torch._dynamo.reset()
    result.us = {name: statistics.median(t) / 1e3 for name, t in times.items()}
    return result


def _layers(returned: dict[str, Any], realify_step: Callable[[], Any]) -> dict[str, Callable[[], Any]] | str:
    """The direct calls of each layer's inner object, or why there are none."""
    from ..backend import _CompiledUnderOptions

    for mode in ("default", "realify"):
        if returned.get(mode) is None:
            return f"{mode} compiled {'several graphs' if mode in returned else 'no graph'}"
    outer = returned["realify"]
    if not isinstance(outer, _CompiledUnderOptions):
        return "realify's backend returned no RealCall (a graph without complex values, or run as captured)"
    realcall = outer.call
    args = _arguments(outer, realify_step)
    # the same function traced from the same inputs: dynamo's graph, and so its arguments, are
    # the same under both backends
    pairs = _real_arguments(realcall, args)
    default_graph, realify_graph = _compiled_fx_graph(returned["default"]), _compiled_fx_graph(realcall.program)
    if default_graph is None or realify_graph is None:
        return "Inductor's CompiledFxGraph not found inside AOTAutograd's wrappers"
    default = returned["default"]
    return {
        "default.backend": lambda: default(*args),
        "default.graph": lambda: default_graph(list(args)),
        "realify.backend": lambda: outer(*args),
        "realify.realcall": lambda: realcall(*args),
        "realify.program": lambda: realcall.program(*pairs),
        "realify.graph": lambda: realify_graph(list(pairs)),
    }


def _arguments(outer: Any, step: Callable[[], Any]) -> tuple:
    """The arguments dynamo passes the graph's compiled function, seen in one call of ``step``."""
    inner, seen = outer.call, []

    def seeing(*args: Any) -> Any:
        seen.append(args)
        return inner(*args)

    outer.call = seeing
    try:
        step()
    finally:
        outer.call = inner
    return seen[0]


def _real_arguments(realcall: Any, args: tuple) -> list:
    """The arguments ``realcall`` passes its program for the caller's ``args``."""
    flat = [*args, *realcall.appended]
    for i, enter in realcall.enters:
        flat[i] = enter(flat[i])
    return flat


def _compiled_fx_graph(compiled: Any) -> Any:
    """Inductor's ``CompiledFxGraph`` inside the wrappers of what ``compile_fx`` returned, or None.

    The wrappers (dynamo's ``disable``, AOTAutograd's forward and runtime wrapper) keep what
    they wrap in ``__wrapped__``, attributes or closure cells; the search follows all three.
    """
    from torch._inductor.output_code import CompiledFxGraph

    pending, seen = [compiled], set()
    while pending:
        obj = pending.pop(0)
        if id(obj) in seen or isinstance(obj, type):
            continue
        seen.add(id(obj))
        if isinstance(obj, CompiledFxGraph):
            return obj
        attributes = getattr(obj, "__dict__", {})
        pending.extend(attributes[k] for k in ("__wrapped__", "compiled", "compiled_fn", "fn") if k in attributes)
        for cell in getattr(obj, "__closure__", None) or ():
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if callable(value):
                pending.append(value)
    return None


def format_overhead(result: Overhead) -> str:
    """One workload variant's table: each call and layer in microseconds, and realify minus default."""
    w = workload(result.workload)
    lines = [f"{result.workload} {result.variant} ({result.size}: {w.describe(result.size)}), "
             f"median of {result.calls} calls each, alternating",
             f"{'call':<52}{'µs':>9}"]
    labels = dict(CALLS)
    for name, us in result.us.items():
        lines.append(f"{labels[name]:<52}{us:>9.1f}")
    if any(result.layer(top, below) is not None for _, _, top, below in LAYERS):
        lines.append(f"{'layer':<52}{'µs':>9}")
        for mode, label, top, below in LAYERS:
            cost = result.layer(top, below)
            if cost is not None:
                lines.append(f"{mode + ': ' + label:<52}{cost:>9.1f}")
    difference = result.layer("realify", "default")
    if difference is not None:
        lines.append(f"{'realify minus default, whole call':<52}{difference:>+9.1f}")
    realify_rest, default_rest = result.not_kernels("realify"), result.not_kernels("default")
    if realify_rest is not None and default_rest is not None:
        lines.append(f"{'realify minus default, beyond the compiled graph':<52}{realify_rest - default_rest:>+9.1f}")
    lines.extend(f"note: {note}" for note in result.notes)
    return "\n".join(lines)
