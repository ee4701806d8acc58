"""The conditions on dynamic sizes that a trace of an exported program relies on.

torch.export checks the program's own conditions on its sizes against the requested Dims, then
freezes its ShapeEnv, which from then on drops new guards with a log line only. A rule that
reads a dynamic size as a number (unrolls a loop over it, say) would leave a real program that
is right for the example's size alone, or, once exported again, one that fails its own
run-time checks at other sizes. :class:`SizeConditions` records such conditions while
realify traces (decompose; ``run_decompositions`` for ONNX) and has the front end refuse the
program, naming the size and the user's line.

The trace runs as torch.export's own does, with the convolution backends (mkldnn, NNPACK,
cuDNN) off: fake convolution's choice of a backend asks questions of the kernel and batch
sizes (``k <= 3``, ``2 < k``) that only pick a memory format but, answered together, fix the
kernel size of a weight whose dims are dynamic; torch.export's trace never asks them.
"""

from __future__ import annotations

import os
import random
import sys
from collections.abc import Callable, Sequence
from typing import Any

import sympy
import torch
import torch.fx.traceback as fx_traceback
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
from torch.utils._sympy.numbers import int_oo

from .dynamo_graph import line_of_trace


class SizeConditions:
    """Records the conditions on sizes that ShapeEnv evaluates while the context is open (not
    those it evaluates with guards suppressed, which only compute metadata).

    ``within``: record only the conditions asked while code of these realify folders or
    modules runs (``"rules"``, ``"onnx/linalg.py"``: realify's forms), not those of torch's own
    decompositions run beside them, which plain torch.onnx's programs hold alike."""

    def __init__(self, values: Sequence[Any], within: Sequence[str] = ()):
        fake = next((x for x in values if isinstance(x, torch._subclasses.FakeTensor)), None)
        self.shape_env = fake.fake_mode.shape_env if fake is not None else None
        self.conditions: list[tuple[Any, str | None]] = []  # each condition, and the user's line
        self.assumed: list[Any] = []
        self._backends: list[bool] = []
        package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        self.within = tuple(os.path.join(package, *name.split("/")) + ("" if name.endswith(".py") else os.sep)
                            for name in within)

    def __enter__(self) -> SizeConditions:
        self._backends = [enabled() for enabled, _ in _CONVOLUTION_BACKENDS]
        for _, enable in _CONVOLUTION_BACKENDS:
            enable(False)
        env = self.shape_env
        if env is not None:
            # the program's own bounds, guarded by torch.export's trace of the complex program:
            # where one fails, eager raises (a convolution's kernel fits its padded input). An
            # equality or inequality guarded there picks a path the program takes at the
            # example's sizes only (torch.cross's first dim of size 3), so it is no premise
            self.assumed = [expr for guard in env.guards
                            if isinstance(expr := env.replace(guard.expr), (sympy.Lt, sympy.Le, sympy.Gt, sympy.Ge))]
            check = env._check_frozen  # called with each condition ShapeEnv is about to guard on

            def recording(expr, concrete_val):
                # a condition on a data-dependent size is a run-time check in the program (a
                # torch._check, as torch.export's own programs hold), not a size fixed
                if (not env._suppress_guards_tls() and not free_unbacked_symbols(expr)
                        and (not self.within or _running_code_in(self.within))
                        and (not _either_answer_is_right() or _pins_a_size(expr, concrete_val))):
                    condition = (expr if concrete_val is sympy.true else sympy.Not(expr) if concrete_val is sympy.false
                                 else sympy.Eq(expr, concrete_val))
                    where = line_of_trace(fx_traceback.get_current_meta().get("stack_trace"))
                    self.conditions.append((condition, where))
                return check(expr, concrete_val)

            env._check_frozen = recording  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.shape_env is not None:
            del self.shape_env._check_frozen
        for (_, enable), was in zip(_CONVOLUTION_BACKENDS, self._backends):
            enable(was)

    def refuse(self, ep: torch.export.ExportedProgram, error: Callable[[str], Exception]) -> None:
        """Raise ``error(described conditions)`` for the conditions on ``ep``'s dynamic sizes
        that do not hold over their whole ranges."""
        env = self.shape_env
        violated = [(cond, where) for cond, where in dict.fromkeys(self.conditions + self._pinned(ep))
                    if cond.free_symbols & set(ep.range_constraints)
                    and not holds_on_ranges(cond, ep, self.assumed)]
        if not violated:
            return

        def name(sym: Any) -> str:
            sources = env.var_to_sources.get(sym) if env is not None else None
            return f"{sym} = {sources[0].name}" if sources else str(sym)

        lines = [f"  - {cond}, for {', '.join(map(name, sorted(cond.free_symbols, key=str)))}"
                 + (f" (at {where})" if where else "") for cond, where in violated[:5]]
        raise error("\n".join(lines))

    def _pinned(self, ep: torch.export.ExportedProgram) -> list[tuple[Any, str | None]]:
        """Sizes the trace fixed to one value without one condition saying so: tests whose
        either answer is right, each recorded as a hint (``guard_or_false``), can together
        narrow a range to a single value, and ShapeEnv then replaces the size by that number."""
        env = self.shape_env
        if env is None:
            return []
        pinned = []
        for sym in ep.range_constraints:
            value = env.replacements.get(sym)
            if value is not None and value.is_number:
                pinned.append((sympy.Eq(sym, value), None))
        return pinned


# (is enabled, enable) for mkldnn, NNPACK and cuDNN: only their on/off flag, which
# torch.backends.*.flags would set together with their precision settings
_CONVOLUTION_BACKENDS = ((torch._C._get_mkldnn_enabled, torch._C._set_mkldnn_enabled),
                         (torch._C._get_nnpack_enabled, torch._C._set_nnpack_enabled),
                         (torch._C._get_cudnn_enabled, torch._C._set_cudnn_enabled))

# torch's guard_or_false / guard_or_true: a test whose either answer gives a right program (a
# faster path or memory format where the size allows it), which torch.export itself drops once
# frozen
_HINTS = frozenset({"_guard_or", "guard_or_false", "guard_or_true"})


def _pins_a_size(expr: Any, concrete_val: Any) -> bool:
    # an equality the example's sizes make true fixes a size even where the question was a
    # hint: broadcasting's "is this size 1?" answered yes for a slice of one element (s - 1 == 1)
    # makes a program for s = 2 alone
    return concrete_val is sympy.true and isinstance(expr, sympy.Eq)


def _running_code_in(folders: tuple[str, ...]) -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename.startswith(folders):
            return True
        frame = frame.f_back
    return False


def _either_answer_is_right() -> bool:
    frame = sys._getframe(2)
    for _ in range(16):
        if frame is None:
            return False
        code = frame.f_code
        if code.co_name in _HINTS:
            return True
        frame = frame.f_back
    return False


def holds_on_ranges(condition: Any, ep: torch.export.ExportedProgram, assumed: Sequence[Any] = ()) -> bool:
    """Whether ``condition`` holds at every size of the program's ranges it is tried at where
    the ``assumed`` conditions on its symbols hold: each symbol at the first 64 values of its
    range, at powers of two and at random values up to its bound, drawn jointly. A condition
    ShapeEnv cannot prove but that holds for every size (``n - (n + 1) // 2 != 0`` for n >= 2:
    the last of two chunks is not empty), or wherever the program's own conditions do (its
    convolution's output size ``(h + 4 - k) // 2 + 3 > 0`` where ``h + 4 >= k``), fixes nothing;
    one that fixes or bounds a size fails at one of the first values past its bound."""
    gen = random.Random(0)
    symbols = sorted(condition.free_symbols, key=str)
    candidates = {}
    for sym in symbols:
        bounds = ep.range_constraints.get(sym)
        lower = _finite(bounds.lower) if bounds is not None else None
        upper = _finite(bounds.upper) if bounds is not None else None
        lower, upper = lower or 0, upper if upper is not None else 1 << 20
        values = {*range(lower, min(upper, lower + 64) + 1), *(1 << k for k in range(21)),
                  *(gen.randint(lower, upper) for _ in range(32))}
        candidates[sym] = sorted(v for v in values if lower <= v <= upper)
    # the first points walk every symbol up its range together; the rest are random
    points = [{sym: candidates[sym][min(i, len(candidates[sym]) - 1)] if i < 70 else gen.choice(candidates[sym])
               for sym in symbols} for i in range(200)]
    premises = [a for a in assumed if a.free_symbols and a.free_symbols <= set(symbols)]
    for point in points:
        values = {sym: sympy.Integer(v) for sym, v in point.items()}
        try:
            if all(bool(a.xreplace(values)) for a in premises) and not bool(condition.xreplace(values)):
                return False
        except (TypeError, ZeroDivisionError):
            return False
    return True


def _finite(bound: Any) -> int | None:
    return None if bound in (int_oo, -int_oo) else int(bound)
