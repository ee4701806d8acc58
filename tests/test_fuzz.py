"""Differential fuzzing: random complex programs through realify against eager PyTorch.

hypothesis draws a program of 3-8 ops over realify's complex ops (pointwise arithmetic and
functions, reductions, scans (cumsum, cumprod, logcumsumexp), contractions, views,
cat/stack, where/masked_fill, index_select, masked_select (a size read from data), FFTs,
view_as_real/view_as_complex round trips, in-place ops, complex Python scalars, autograd
constructs, and an op of the user's own with no rule, an eager island) and its inputs
(complex64/complex128, 0-dim, empty, broadcast, non-contiguous, conj views, aliased and
overlapping arguments; values mixing 0, -0, +-inf, nan, 1e30, a subnormal and exact axis points).
The program runs through ``realify.compile`` and eagerly; outputs, inputs after the call and
gradients are compared (:func:`check_program`). About half the programs are then called twice
more through the same compiled function, at inputs grown to twice each size of 2 or more
(automatic dynamic shapes recompile with symbolic sizes) and then each such size plus one (that
graph must serve), and compared again; realify then keeps no more graphs for the three calls
than the default backend's capture does for the same calls (:func:`_check_graph_count`). A failing example
prints as the Python program and the inputs that reproduce it (``Program.__repr__``), shrunk by hypothesis.

Export is the other front end, and its sizes are the user's to choose: a program exported once
is called at whatever sizes its dynamic dims take. So each export program is compiled as above
and also run through ``realify.export`` (:func:`check_export`; both:
:func:`check_every_front_end`) with every input dim ``Dim.AUTO``, ``Dim.DYNAMIC`` or a ``Dim``
from 1 up (drawn; the first two start at 2), then through ``ComplexCallAdapter`` at the
example's sizes and at others: grown by two drawn steps, shrunk by one, and 1 where the
program's ranges allow it (export_sizes in realify/tools/symbolic_sizes.py, the OpInfo
table's), the inputs' drawn values tiled or cut to the new shape. Each is compared with eager
as above, outputs, inputs written in place and gradients alike; for some complex64 programs the
ONNX model runs in ONNX Runtime at the same sizes. A size eager or plain ``torch.export``'s own
program rejects is not one the program must take. realify.export may refuse a dynamic dim with
torch.export's constraint violation (and realify.onnx with ``NoOnnxFormError``), naming the
size: an outcome. A crash, a dim plain torch.export keeps dynamic that realify's program fixes,
a run-time guard failure at a size plain torch.export's program takes, or a wrong value fails.
Programs with an op of the user's own are not drawn for export (an exported program has no
eager islands, by design; the long runs export every program they draw without one), and
gradients go unchecked where the program holds an autograd construct other than a stop-gradient
or a grad-mode region (the exported program is the forward's trace: see ``op_autograd``).

How close is close enough (:func:`assert_matches`). Two implementations of the same op that
are each backward stable differ, per element, by a few rounding errors of that op times the
condition of everything computed after it. The first part is bounded: ``C * depth * eps *
|x|``, a few ulps per op (realify's rules round each part a bounded number of times:
docs/numerics.md). The condition factor is not bounded by anything depth alone can give
(``sin(1e30 * z)``, ``a - a'`` cancelling): it is *measured*. Eager's own error on the element,
``|eager_c64 - eager_c128|`` (the same program in complex128, from the same, exactly
representable inputs), is that condition times about eps; realify may be a constant factor
``K`` less lucky. So a complex64 element passes when ``|realify - eager| <= C d eps |x| + K
|eager_c64 - eager_c128|``. For complex128 programs the measured complex64 error, scaled by
``eps128 / eps64``, stands for it. Eager's two precisions can agree exactly by luck where the
condition is large (an FFT of quotients ``z / z``, exact in one precision only), so the
condition is also measured without luck: eager's complex128 program with one complex64
rounding per op, against the same program unperturbed (``Program.perturbed_function``). Where
eager's complex64 result is itself not what complex128 gives in kind (it overflowed, or made a
nan, where complex128 did not: a subnormal divisor, docs/numerics.md "Division"), realify must
match the complex128 result instead. Everywhere else nan and +-inf must sit in the same parts
as eager's. Signs of zeros are not compared: they differ by design in C99 addition and division (docs/numerics.md).

Deliberate differences are excluded by construction, not by looser comparisons; each
generator says where (``C99`` in the comments below). The bounded run, part of the default
suite, takes each of its 200 programs through both front ends (12 more through Inductor);
``-m fuzz_long`` runs 2000+ programs more through both front ends, and 500 drawn for export.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import os
import re
import textwrap
import warnings
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from no_rule_ops import phase_twist
from torch._dynamo.exc import UserError, UserErrorType
from torch.export import Dim
from torch.utils._pytree import tree_leaves

import realify
from realify.errors import RealifyError
from realify.tools.symbolic_sizes import _Program as ModuleOf
from realify.tools.symbolic_sizes import (
    auto_shapes,
    dynamic_input_dims,
    export_sizes,
    from_one_shapes,
    onnx_session,
    plain_takes,
    run_session,
)

C64, C128 = torch.complex64, torch.complex128
INF, NAN = math.inf, math.nan

# Features that a known bug kept off, each with that bug. True keeps a feature off; those
# that are on were known bugs fixed while the fuzzer was written (each ran 250-300 programs
# clean once on). Turning one off again hides its bug from the fuzzer.
KEEP_OFF = {
    # wrong gradients on the real/imaginary axes and branch cuts (sin, cos, tanh, sqrt, log,
    # ...): the gradient rework in realify/rules owns it. Programs whose inputs hold exact
    # axis points or special values still run; only their gradients go unchecked.
    "axis_gradients": False,  # fixed by now: on
    # an input passed twice (or two overlapping views of one tensor) and written in place:
    # later reads of the other argument see stale values (realify/backend.py boundary code)
    "aliased_mutation": False,  # fixed by now: on
    # prod over values with infinite parts (realify/rules/reductions.py)
    "prod_of_infinities": False,  # fixed by now: on
    # reshape/flatten of an expanded view, returned with a view of the same input: once rebuilt
    # as a view of the input (test_expanded_reshape_and_view_outputs)
    "reshape_of_expanded": False,  # fixed: on
    # cumprod's gradient where a row holds a zero followed by an infinite part: nan for the
    # later entries where the derivative was autograd through the running product (0 * inf),
    # 0 in eager's formula, which realify's rule now has
    "cumprod_of_infinities": False,  # fixed: on
    # a contraction (einsum, @) exported with dims from 1 up and called at size 1: realify's
    # program failed a run-time guard of torch.export's trace of it (a size-1 dim's stride among
    # symbolic ones; dims of one Dim compared before they were known equal), where plain
    # torch.export's program runs (realify/passes/unit_dims.py, realify/export.py _equal_sizes)
    "size_one_of_contractions": False,  # fixed: on
    # a custom autograd.Function compiled with dynamic=True: realify keeps a graph per size,
    # the default backend's capture one. Running the Function's forward graph on dynamo's fakes
    # to read its outputs' metadata (realify/engine/custom_functions.py) ran C++ meta kernels,
    # which read symbolic sizes as numbers (torch.complex's). Found by the long run
    "graphs_of_custom_functions": False,  # fixed: on
    # squeeze() without dims in a program exported with dims from 1 up, run in ONNX Runtime at
    # size 1: the squeeze drops that dim too, the rank changes at run time, and ONNX Runtime's
    # graph optimizer (GatherSliceToSplitFusion, fusing the reads of the two parts into a
    # Split with an axis fixed at export's rank) fails. Plain torch.onnx's model of the real
    # analog fails the same way (docs/limits.md): the ONNX run skips size 1 for such programs
    "onnx_rank_changing_squeeze": True,
}

def _product_bound(bound: float, n: int) -> float:
    """A bound on the magnitude of a product of ``n`` values bounded by ``bound``."""
    return bound ** n if bound < 1e15 else INF


class FuzzScaled(torch.autograd.Function):
    """A product with a constant whose backward is not its derivative: another constant."""

    FACTOR = 0.5 + 1j  # the bound's; dynamo does not trace a class attribute that is a complex number

    @staticmethod
    def forward(ctx, x):
        return x * (0.5 + 1j)

    @staticmethod
    def backward(ctx, grad):
        return grad * (2 - 0.5j)


class FuzzPassThrough(torch.autograd.Function):
    """A straight-through estimator: the value's phase-free magnitude on the real axis, the
    gradient passed through unchanged."""

    @staticmethod
    def forward(ctx, x):
        return torch.complex(x.abs(), torch.zeros_like(x.real))

    @staticmethod
    def backward(ctx, grad):
        return grad


# a user's own torch.library op on complex tensors: realify has no rule for it, so the program
# holds an eager island (op_island)
AUTOGRAD_NAMES = {"FuzzScaled": FuzzScaled, "FuzzPassThrough": FuzzPassThrough, "phase_twist": phase_twist}
# dynamo records a hook on an intermediate in the graph from torch 2.15 (before, a graph break,
# which the fuzzer's fullgraph=True refuses)
HAS_IN_GRAPH_HOOKS = importlib.util.find_spec("torch._higher_order_ops.register_hook") is not None

# A subnormal of complex64 (and so a divisor whose reciprocal overflows there): 2**-133, held
# exactly in both precisions. A decimal such as 1e-40 rounds to 16 bits in complex64, an input
# error of 1e-5 relative that complex128's reference does not share, as if realify were wrong
SUBNORMAL = 2.0**-133
SPECIALS = (0.0, -0.0, INF, -INF, NAN, 1e30, -1e30, SUBNORMAL, -SUBNORMAL)
# Complex Python scalars: both parts finite and nonzero. C99: a real scalar (or a complex one
# with a zero part, which eager widens through a product with 1 + 0i) meets realify's mixed
# real/complex arithmetic, which deliberately differs from eager with infinities and signed
# zeros ((inf + 1j) * 2.5 = inf + 2.5j, eager inf + nanj). Those are documented choices.
SCALARS = (1j, 0.5 - 2j, -1.5 + 0.25j, 2 + 1e-3j, -0.75 - 0.5j)
# Real Python scalars scale a value known to be finite (op_scalar): both parts alike, which
# the layout pass runs on the (re, im) pairs (realify/passes/layout.py, rule 2); with
# infinities they would meet the C99 difference above. The zeros' signs may differ from
# eager's (eager's product with 2 + 0i adds a signed 0 * im to the real part).
REAL_SCALARS = (2.0, -0.5)
POW_EXPONENTS = ("2", "3", "0.5", "-1", "(1+1j)")
# the functions among the fuzzer's whose value jumps across a branch cut on an axis, where the
# sign of a zero part picks the side (Var.signed)
CUT_FUNCTIONS = {"log", "sqrt"}
CUT_EXPONENTS = {"0.5", "(1+1j)"}


# ---- program representation ------------------------------------------------------------------


@dataclasses.dataclass
class Input:
    """One argument: a base tensor (the autograd leaf) from ``values``, and how the argument
    is made from it (``view``: an expression of ``base``) or from another argument (aliases)."""

    name: str
    shape: tuple[int, ...]
    values: list[complex]
    axis: str = ""  # "real" / "imag": made from real data (exact axis points)
    view: str = "base"  # "base", "base.conj()", "base.mT", "base[..., ::2]", "base[:-1]", "expand" (to shape)
    base_shape: tuple[int, ...] = ()
    alias_of: str | None = None  # the same tensor as another argument
    overlap_of: str | None = None  # base[1:] of another argument's base[:-1] (overlapping views)

    def code(self, dtype: torch.dtype, sizes: dict[int, int] | None = None) -> str:
        """The lines that make the argument; ``sizes``: at its shape with each size found in
        the map replaced (one map for every argument, so sizes that must agree still do), the
        base's values tiled or cut (every special value and magnitude the drawn ones hold)."""
        if self.alias_of is not None:
            return f"{self.name} = {self.alias_of}  # the same tensor twice"
        if self.overlap_of is not None:
            base = f"{self.overlap_of}_base"
            return f"{self.name} = {base}[1:]  # overlaps {self.overlap_of} = {base}[:-1]"
        values = ", ".join(_complex_literal(v) for v in self.values)
        data = f"torch.tensor([{values}], dtype={_dtype_name(dtype)}).reshape({self.base_shape!r})"
        shape = tuple(sizes.get(n, n) for n in self.shape) if sizes else self.shape
        base_shape = _base_shape(self.view, shape)
        if base_shape != self.base_shape:
            reps = tuple(-(-new // old) if old else 1 for old, new in zip(self.base_shape, base_shape))
            data = f"{data}.repeat({reps})[{', '.join(f':{n}' for n in base_shape)}]"
        if self.axis == "real":
            data = f"(lambda d: torch.complex(d.real, torch.zeros_like(d.real)))({data})"
        elif self.axis == "imag":
            data = f"(lambda d: torch.complex(torch.zeros_like(d.imag), d.imag))({data})"
        view = f"base.expand{shape}" if self.view == "expand" else self.view
        return f"{self.name}_base = {data}\n{self.name} = {view.replace('base', self.name + '_base')}"


def _later_sizes(program: Program) -> list[dict[int, int]]:
    """The sizes a program sees at its later calls: each size of 2 or more doubled, then plus
    one (0 and 1, which dynamo specializes, kept)."""
    sizes = {n for i in program.inputs for n in i.shape if n >= 2}
    return [{n: 2 * n for n in sizes}, {n: n + 1 for n in sizes}] if sizes else []


def _base_shape(view: str, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The shape of the base tensor an argument of ``shape`` is the view ``view`` of."""
    if view == "base.mT":
        return (*shape[:-2], shape[-1], shape[-2])
    if view == "base[..., ::2]":
        return (*shape[:-1], 2 * shape[-1])
    if view == "expand":
        return (1, *shape[1:])
    if view == "base[:-1]":
        return (shape[0] + 1, *shape[1:])
    return shape


@dataclasses.dataclass
class Program:
    dtype: torch.dtype
    inputs: list[Input]
    lines: list[str]
    outputs: list[str]
    depth: int
    mutates_inputs: bool = False
    check_grads: bool = True
    projection_seed: int = 0
    dynamic: bool = False  # compiled with dynamic=True: every size symbolic (but those of 0 and 1)
    # called twice more, at the inputs grown (Input.code, _later_sizes): automatic dynamic
    # shapes then recompile with symbolic sizes, as a loop over batches or lengths does
    later_calls: bool = False
    # this copy's inputs at other sizes (Input.code): the grown ones, or an exported program's
    sizes: dict[int, int] | None = None
    # through realify.export (check_export) rather than realify.compile: every input dim
    # Dim.AUTO ("auto"), Dim.DYNAMIC ("dynamic") or a Dim from 1 up ("from 1"), then called at
    # its sizes grown by each of export_steps, shrunk, and 1 where its ranges allow; in ONNX
    # Runtime too where onnx_runtime
    export_dims: str | None = None
    export_steps: tuple[int, ...] = (1, 3)
    onnx_runtime: bool = False
    # an autograd construct whose gradient is not its trace's (Builder.gradient_outside_trace):
    # the exported program's gradients are not compared
    gradient_outside_trace: bool = False

    def source(self, lines: list[str] | None = None) -> str:
        args = ", ".join(i.name for i in self.inputs)
        body = "\n".join((self.lines if lines is None else lines) + [f"return ({', '.join(self.outputs)},)"])
        return f"def program({args}):\n{textwrap.indent(body, '    ')}\n"

    def function(self, lines: list[str] | None = None, **names: Any):
        """The program as a function (``lines`` in place of its own, ``names`` in its scope)."""
        namespace = {"torch": torch, "inf": INF, "nan": NAN, **AUTOGRAD_NAMES, **names}
        exec(compile(self.source(lines), f"<fuzz program {id(self)}>", "exec"), namespace)
        return namespace["program"]

    def perturbed_function(self, size: float, seed: int):
        """The program with every op's result perturbed componentwise, each real part x to
        ``x (1 + size r)`` (r uniform in [-1, 1], drawn from ``seed``): one rounding error
        per op where the part is not 0. Zero parts stay 0 and signs stay, so no branch cut or
        comparison changes side; the outputs' change measures the program's condition at
        its own data (:func:`check_program`)."""
        gen = torch.Generator().manual_seed(seed)

        def perturb(x):
            if not isinstance(x, torch.Tensor) or not (x.is_complex() or x.is_floating_point()):
                return x
            # differentiable (not _parts, which detaches): _perturbed_grads reads gradients
            parts = torch.view_as_real(x.resolve_conj().resolve_neg()) if x.is_complex() else x
            r = torch.rand(parts.shape, generator=gen, dtype=parts.dtype) * 2 - 1
            parts = parts * (1 + size * r)
            return torch.view_as_complex(parts.contiguous()) if x.is_complex() else parts

        lines = []
        for line in self.lines:
            lines.append(line)
            lines += [f"{name} = _perturb({name})" for name in re.findall(r"^(v\d+) = ", line, re.M)]
        return self.function(lines, _perturb=perturb)

    def make_inputs(self, dtype: torch.dtype | None = None, requires_grad: bool = False):
        """(arguments, leaves): the leaves are the base tensors, for gradients."""
        dtype = dtype or self.dtype
        env: dict[str, Any] = {"torch": torch, "inf": INF, "nan": NAN}
        leaves = []
        for spec in self.inputs:
            if spec.alias_of is not None or spec.overlap_of is not None:
                exec(spec.code(dtype, self.sizes), env)
                continue
            exec(spec.code(dtype, self.sizes).split("\n")[0], env)
            base = env[f"{spec.name}_base"]
            if requires_grad:
                base.requires_grad_(True)
            leaves.append(base)
            exec(spec.code(dtype, self.sizes).split("\n")[1], env)
        return [env[i.name] for i in self.inputs], leaves

    def _repr_pretty_(self, printer, cycle) -> None:  # hypothesis prints examples with this
        printer.text(repr(self))

    def __repr__(self) -> str:
        inputs = "\n".join(i.code(self.dtype, self.sizes) for i in self.inputs)
        call = ", ".join(i.name for i in self.inputs)
        grads = "; gradients of the projected outputs" if self.check_grads else ""
        second = ""
        for sizes in _later_sizes(self) if self.later_calls else ():
            grown = "\n".join(i.code(self.dtype, sizes) for i in self.inputs)
            second += f"# then the same compiled function on\n{grown}\n"
        text = (f"\n{self.source()}\n{inputs}\n{second}"
                f"# compare realify.compile(program, inner=...{', dynamic=True' if self.dynamic else ''})({call}) "
                f"with program({call}){grads}\n")
        if self.export_dims is not None:
            dim = {"auto": "Dim.AUTO",
                   "dynamic": "Dim.DYNAMIC (Dim.AUTO for sizes 0 and 1, or where plain torch.export refuses it)",
                   "from 1": "Dim(f'n{size}', min=1), one per size (Dim.AUTO where plain torch.export refuses it)",
                   }[self.export_dims]
            onnx = ", and its realify.onnx.to_onnx in ONNX Runtime" if self.onnx_runtime else ""
            grads = grads if not self.gradient_outside_trace else ""
            text += (f"# and realify.ComplexCallAdapter(realify.export(program, ({call},), dynamic_shapes=every "
                     f"input dim {dim}))({call}){onnx} with program({call}){grads}; then at sizes grown by "
                     f"{self.export_steps}, shrunk by 1, and 1 where its ranges allow\n")
        return text


def _complex_literal(v: complex) -> str:
    def part(x: float) -> str:
        if math.isnan(x):
            return "nan"
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        return repr(x)
    return f"complex({part(v.real)}, {part(v.imag)})"


def _dtype_name(dtype: torch.dtype) -> str:
    return f"torch.{str(dtype).split('.')[-1]}"


# ---- program generation ----------------------------------------------------------------------


@dataclasses.dataclass
class Var:
    name: str
    shape: tuple[int, ...]
    complex: bool
    bound: float  # an upper bound of |value| over every element (inf: none known)
    expanded: bool = False  # a view with a stride 0 (expand), or a view of one
    # its zero parts carry eager's signs. Eager's vectorized complex neg computes 0 - x (so
    # -(x + 0i) keeps +0 in vector lanes, -0 in the scalar tail); C99 addition and division
    # (docs/numerics.md) and every cancelling sum (reductions, GEMMs, FFTs) may sign a zero
    # otherwise. Only functions with a branch cut turn a zero's sign into a different value
    # (log(-1 + 0i) = i pi, log(-1 - 0i) = -i pi): they take only values signed as eager's.
    # Division may also leave a part exactly 0 where eager's is a rounding error (z / z is
    # 1 + 0i, eager 1 + 3e-9i: docs/numerics.md), which an infinite factor turns into nan
    # against eager's inf: a product or quotient with a non-finite operand takes only values
    # whose zeros are eager's
    signed: bool = True
    # its magnitude bound exceeds the dtype's largest number: it may hold an overflow, whose
    # nan/inf pattern differs between eager's vectorized products (FMA: -inf + inf i for
    # (-2.5e29 - 1.5e30i)^2 in complex64) and C99's formula (nan + inf i, realify and eager's
    # scalar path), and a function of it can map the two to a finite value and nan
    # (tanh(-inf + inf i) = -1). Such a value is only returned, never used further
    overflows: bool = False

    @property
    def finite(self) -> bool:
        return self.bound < 1e15  # finite, and far from overflowing in products with another such


class Builder:
    """Draws a program op by op, keeping the shape, kind and magnitude bound of each value.
    Shapes come from running each line on zeros (cheap, and exactly eager's rules)."""

    def __init__(self, draw, dtype: torch.dtype, allow_special: bool, allow_mutation: bool, export: bool = False,
                 control: bool = True):
        self.draw, self.dtype = draw, dtype
        self.allow_special, self.allow_mutation, self.export = allow_special, allow_mutation, export
        self.control = control
        self.inputs: list[Input] = []
        self.vars: list[Var] = []
        self.lines: list[str] = []
        self.env: dict[str, Any] = {"torch": torch, "inf": INF, "nan": NAN, **AUTOGRAD_NAMES}
        self.counter = 0
        self.mutated = False
        self.has_axis_or_special = False
        # an autograd construct other than a stop-gradient (op_autograd): its gradient is not
        # its trace's, which is what an exported program differentiates
        self.gradient_outside_trace = False
        self.has_island = False  # an op without a rule: realify.export refuses the program by design

    # values and inputs

    def values(self, n: int, special: bool) -> list[complex]:
        finite = st.floats(-3, 3, allow_nan=False, allow_infinity=False, width=32)
        part = st.one_of(st.sampled_from(SPECIALS), finite) if special else finite
        return [complex(self.draw(part), self.draw(part)) for _ in range(n)]

    def new_input(self, shape: tuple[int, ...], plain: bool = False) -> Var:
        draw = self.draw
        name = "abcdefghijklmnop"[len(self.inputs)]
        special = self.allow_special and not plain and draw(st.booleans())
        axis = "" if plain else draw(st.sampled_from(["", "", "", "real", "imag"]))
        view = "base"
        kinds = ["base"] if plain else ["base", "base", "conj", "mT", "strided", "expand", "alias", "overlap"]
        kind = draw(st.sampled_from(kinds))
        candidates = [i for i in self.inputs if i.shape == shape and i.alias_of is None and i.overlap_of is None]
        if kind == "alias" and candidates:
            other = draw(st.sampled_from(candidates))
            spec = Input(name, shape, [], alias_of=other.name)
            return self._add_input(spec, next(v for v in self.vars if v.name == other.name).bound)
        if kind == "overlap" and len(shape) >= 1 and shape[0] >= 1:
            # two arguments that are overlapping views of one storage: base[:-1], base[1:]
            base_shape = _base_shape("base[:-1]", shape)
            vals = self.values(math.prod(base_shape), special)
            first = Input(name, shape, vals, axis, "base[:-1]", base_shape)
            self._add_input(first, _bound(vals, axis))
            second_name = "abcdefghijklmnop"[len(self.inputs)]
            second = Input(second_name, shape, [], overlap_of=name)
            return self._add_input(second, _bound(vals, axis))
        if kind == "conj":
            view = "base.conj()"
        elif kind == "mT" and len(shape) >= 2:
            view = "base.mT"
        elif kind == "strided" and len(shape) >= 1:
            view = "base[..., ::2]"
        elif kind == "expand" and len(shape) >= 1 and shape[0] != 1:
            view = "expand"
        base_shape = _base_shape(view, shape)
        vals = self.values(math.prod(base_shape), special)
        spec = Input(name, shape, vals, axis, view, base_shape)
        return self._add_input(spec, _bound(vals, axis))

    def _add_input(self, spec: Input, bound: float) -> Var:
        self.inputs.append(spec)
        if spec.overlap_of is not None:
            base = self.env[f"{spec.overlap_of}_base"]
            self.env[spec.name] = base[1:]
        elif spec.alias_of is not None:
            self.env[spec.name] = self.env[spec.alias_of]
        else:
            exec(spec.code(self.dtype), self.env)
        if spec.axis or bound == INF or bound > 1e15:
            self.has_axis_or_special = True
        var = Var(spec.name, tuple(self.env[spec.name].shape), True, bound, expanded="expand" in spec.view)
        self.vars.append(var)
        return var

    # statements

    def emit(self, expr: str, bound: float, line: str | None = None, signed: bool = True) -> Var:
        name = f"v{self.counter}"
        self.counter += 1
        line = line or f"{name} = {expr}"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                exec(line.replace("{name}", name), self.env)
            except RuntimeError:  # eager refuses it too (view_as_real of a conj view): no op
                self.counter -= 1
                return None
        value = self.env[name]
        var = Var(name, tuple(value.shape), value.dtype.is_complex, bound, signed=signed,
                  overflows=self._overflows(bound))
        self.lines.append(line.replace("{name}", name))
        self.vars.append(var)
        return var

    def _overflows(self, bound: float) -> bool:
        return math.isfinite(bound) and bound > torch.finfo(self.dtype.to_real()).max

    def pick(self, complex_only: bool = True, pred=lambda v: True) -> Var | None:
        choices = [v for v in self.vars if (v.complex or not complex_only) and pred(v) and not v.overflows]
        return self.draw(st.sampled_from(choices)) if choices else None

    def partner(self, v: Var, finite: bool = False) -> Var | None:
        """A complex value whose shape broadcasts with ``v``'s to ``v``'s shape, or a fresh input."""
        fits = lambda w: w.complex and _broadcasts_to(w.shape, v.shape) and (w.finite or not finite) and not w.overflows
        choices = [w for w in self.vars if fits(w)]
        if choices and self.draw(st.booleans()):
            return self.draw(st.sampled_from(choices))
        shape = v.shape
        if shape and self.draw(st.booleans()):  # broadcast from a smaller shape
            shape = self.draw(st.sampled_from([shape[1:], (1, *shape[1:]), shape[-1:]]))
        return self.new_input(shape, plain=finite)

    def step(self) -> None:
        draw = self.draw
        kinds = ["unary", "unary", "binary", "binary", "scalar", "reduce", "scan", "view", "view", "contract",
                 "join", "select", "fft", "roundtrip", "inplace", "real", "autograd", "island", "control"]
        if self.export:
            # an exported program has no eager islands: realify.export refuses an op without a
            # rule by design (MissingRuleError, docs/export.md "Limits")
            kinds.remove("island")
        if not self.control:
            kinds.remove("control")
        kind = draw(st.sampled_from(kinds))
        getattr(self, f"op_{kind}")()

    def op_unary(self) -> None:
        v = self.pick()
        fn = self.draw(st.sampled_from(["exp", "log", "sqrt", "sin", "cos", "tanh", "conj", "reciprocal",
                                        "neg", "pow"]))
        b = v.bound
        if fn == "pow":
            e = self.draw(st.sampled_from(POW_EXPONENTS))
            if e in CUT_EXPONENTS and not v.signed:
                e = "2"
            bound = {"2": b * b, "3": b ** 3, "0.5": math.sqrt(b)}.get(e, INF)
            self.emit(f"{v.name} ** {e}", bound, signed=v.signed)
            return
        if fn in CUT_FUNCTIONS and not v.signed:
            fn = "exp"
        bound = {"exp": _exp(b), "sin": _exp(b), "cos": _exp(b), "sqrt": math.sqrt(b), "conj": b, "neg": b}.get(fn, INF)
        conj = st.sampled_from([f"{v.name}.conj()", f"torch.conj_physical({v.name})"])
        expr = f"torch.{fn}({v.name})" if fn != "conj" else self.draw(conj)
        self.emit(expr, bound, signed=v.signed and fn not in ("neg", "reciprocal"))  # a division: C99

    def op_binary(self) -> None:
        v = self.pick()
        op = self.draw(st.sampled_from(["+", "-", "*", "/"]))
        # C99 (docs/numerics.md, "Addition"): eager adds ``a + 1 * b`` through a complex
        # product, which turns a non-finite part of the second operand into nan in both parts,
        # where realify's sum is componentwise. So the second operand of + and - is a value
        # known to be finite (a magnitude bound), by construction.
        w = self._zeros_meet_infinities_as_eagers(v, self.partner(v, finite=op in "+-"))
        bound = {"+": v.bound + w.bound, "-": v.bound + w.bound, "*": v.bound * w.bound}.get(op, INF)
        left, right = (v, w) if self.draw(st.booleans()) or op in "+-" else (w, v)
        self.emit(f"{left.name} {op} {right.name}", bound, signed=v.signed and w.signed and op == "*")

    def op_scalar(self) -> None:
        v = self.pick()
        if v.finite and self.draw(st.integers(0, 3)) == 0:
            s = self.draw(st.sampled_from(REAL_SCALARS))
            op = self.draw(st.sampled_from(["*", "/"]))
            return self.emit(f"{v.name} {op} {s!r}", v.bound * (abs(s) if op == "*" else 1 / abs(s)), signed=False)
        s = self.draw(st.sampled_from(SCALARS))
        op = self.draw(st.sampled_from(["+", "-", "*", "/", "r-", "r/"]))
        bound = {"+": v.bound + abs(s), "-": v.bound + abs(s), "r-": v.bound + abs(s),
                 "*": v.bound * abs(s), "/": v.bound / abs(s)}.get(op, INF)
        if op.startswith("r"):
            if op == "r-" and not v.finite:  # C99 addition (above): the second operand finite
                op = "*"
            expr = f"{s!r} {op[1]} {v.name}" if op != "*" else f"{v.name} * {s!r}"
        else:
            expr = f"{v.name} {op} {s!r}"
        self.emit(expr, bound, signed=v.signed and op == "*")

    def op_reduce(self) -> None:
        v = self.pick(pred=lambda v: len(v.shape) >= 1)
        if v is None:
            return self.op_unary()
        fn = self.draw(st.sampled_from(["sum", "mean", "prod"]))
        if fn == "prod" and KEEP_OFF["prod_of_infinities"] and not v.finite:
            fn = "sum"
        if fn == "mean" and not v.finite:
            # C99: mean divides the sum by a real count, mixed real/complex arithmetic, which
            # realify does per part ((inf + 4j) / 3 = inf + 1.33j; eager divides by 3 + 0j
            # and gets inf + nanj): values with infinite parts are summed instead
            fn = "sum"
        dim, n = self._dim_of(v)
        keepdim = self.draw(st.booleans())
        bound = {"sum": n * v.bound, "mean": v.bound, "prod": _product_bound(v.bound, n)}[fn]
        self.emit(f"{v.name}.{fn}(dim={dim}{', keepdim=True' if keepdim else ''})", bound, signed=False)

    def _dim_of(self, v: Var) -> tuple[int, int]:
        """A dim of ``v`` to reduce or scan along, and its size (at least 1)."""
        dim = self.draw(st.integers(-len(v.shape), len(v.shape) - 1))
        return dim, max(v.shape[dim], 1)

    def op_scan(self) -> None:
        v = self.pick(pred=lambda v: len(v.shape) >= 1)
        if v is None:
            return self.op_unary()
        fn = self.draw(st.sampled_from(["cumsum", "cumprod", "logcumsumexp"]))
        if fn == "cumprod" and KEEP_OFF["cumprod_of_infinities"] and not v.finite:
            fn = "cumsum"
        dim, n = self._dim_of(v)
        # logcumsumexp: |out| <= max|re z| + log n + |imaginary part|, which eager's loop does
        # not wrap: no bound worth carrying
        bound = {"cumsum": n * v.bound, "cumprod": _product_bound(v.bound, n)}.get(fn, INF)
        self.emit(f"torch.{fn}({v.name}, dim={dim})", bound, signed=False)

    def op_island(self) -> None:
        """An op realify has no rule for (a user's own custom op): an eager island between
        planar ops, its gradient the op's registered formula."""
        v = self.pick()
        self.has_island = True
        self.emit(f"phase_twist({v.name})", v.bound, signed=False)

    def op_view(self) -> None:
        v = self.pick()
        nd = len(v.shape)
        options = ["unsqueeze"]
        if not (v.expanded and KEEP_OFF["reshape_of_expanded"]):
            options += ["reshape", "flatten"]
        if nd >= 2:
            options += ["transpose", "mT", "permute"]
        if nd >= 1:
            options += ["slice", "step", "squeeze", "expand"]
            if v.shape[0] >= 1:
                options += ["select"]
        how = self.draw(st.sampled_from(options))
        expr = {
            "reshape": f"{v.name}.reshape(-1)",
            "unsqueeze": f"{v.name}.unsqueeze(0)",
            "flatten": f"{v.name}.flatten()",
            "transpose": f"{v.name}.transpose(0, 1)",
            "mT": f"{v.name}.mT",
            "permute": f"{v.name}.permute({tuple(reversed(range(nd)))})",
            "slice": f"{v.name}[1:]",
            "step": f"{v.name}[..., ::2]",
            "squeeze": f"{v.name}.squeeze()",
            "expand": f"{v.name}.unsqueeze(0).expand(2, *{v.name}.shape)",
            "select": f"{v.name}[0]",
        }[how]
        out = self.emit(expr, v.bound, signed=v.signed)
        if out is not None:
            out.expanded = v.expanded or how == "expand"

    def op_contract(self) -> None:
        # BLAS promises nothing for non-finite operands (eager's own complex GEMM returns
        # nan + nanj for (inf + 1j) @ (2 + 1j)): contractions get operands known to be finite
        v = self.pick(pred=lambda v: len(v.shape) >= 1 and v.finite)
        if v is None:
            return self.op_unary()
        how = self.draw(st.sampled_from(["matmul", "einsum", "dot"]))
        k = v.shape[-1]
        if how == "dot":
            w = self.partner(v, finite=True)
            if w.shape != v.shape:
                return self.emit(f"{v.name} * {w.name}", v.bound * w.bound, signed=v.signed and w.signed)
            self.emit(f"torch.einsum('...i,...i->...', {v.name}, {w.name})", k * v.bound * w.bound, signed=False)
            return
        n = self.draw(st.integers(1, 3))
        w = self.new_input((k, n), plain=True)
        op = f"{v.name} @ {w.name}" if how == "matmul" else f"torch.einsum('...i,ij->...j', {v.name}, {w.name})"
        self.emit(op, k * v.bound * w.bound, signed=False)

    def op_join(self) -> None:
        v = self.pick()
        same = [w for w in self.vars if w.complex and w.shape == v.shape and not w.overflows]
        w = self.draw(st.sampled_from(same))
        how = self.draw(st.sampled_from(["cat", "stack"]))
        dims = len(v.shape) + (how == "stack")
        if how == "cat" and not v.shape:
            how, dims = "stack", 1
        dim = self.draw(st.integers(0, max(dims - 1, 0)))
        self.emit(f"torch.{how}([{v.name}, {w.name}], dim={dim})", max(v.bound, w.bound), signed=v.signed and w.signed)

    def op_select(self) -> None:
        v = self.pick()
        how = self.draw(st.sampled_from(["where", "masked_fill", "index_select", "masked_select"]))
        if how == "index_select":
            dims = [d for d, n in enumerate(v.shape) if n >= 1]
            if not dims:
                how = "where"
            else:
                d = self.draw(st.sampled_from(dims))
                index = self.draw(st.lists(st.integers(0, v.shape[d] - 1), min_size=1, max_size=4))
                return self.emit(f"torch.index_select({v.name}, {d}, torch.tensor({index}))", v.bound, signed=v.signed)
        if how == "masked_select":
            # a size read from the data (dynamo captures it with capture_dynamic_output_shape_ops),
            # written back where it came from: the program's shapes stay data-independent
            mask = f"{v.name}.real > 0"
            selected = f"torch.masked_select({v.name}, {mask})"
            return self.emit(f"torch.zeros_like({v.name}).masked_scatter({mask}, {selected})", v.bound,
                             signed=v.signed)
        if how == "masked_fill":
            s = self.draw(st.sampled_from(SCALARS))
            return self.emit(f"{v.name}.masked_fill({v.name}.imag < 0, {s!r})", max(v.bound, abs(s)), signed=v.signed)
        w = self.partner(v)
        self.emit(f"torch.where({v.name}.real > 0, {v.name}, {w.name})", max(v.bound, w.bound),
                  signed=v.signed and w.signed)

    def op_fft(self) -> None:
        # MKL's FFT refuses an empty tensor even along a nonempty dim: nonempty values only
        v = self.pick(pred=lambda v: len(v.shape) >= 1 and math.prod(v.shape) >= 1)
        if v is None:
            return self.op_unary()
        dim = self.draw(st.sampled_from([d for d, n in enumerate(v.shape) if n >= 1]))
        how = self.draw(st.sampled_from(["fft", "ifft", "rfft", "irfft"]))
        # "ortho" and "forward" scale by 1/sqrt(n) and 1/n: the "backward" bound holds for all
        norm = self.draw(st.sampled_from(["backward", "ortho", "forward"]))
        # centered, as imaging code writes transforms: a half-size roll of the input (ifftshift),
        # of the output (fftshift), or both; an even size's become sign products
        # (realify/passes/centered_fft.py), an odd size's stay rolls
        centered = self.draw(st.sampled_from(["", "in", "out", "both"]))
        source = f"{v.name}.real" if how == "rfft" else v.name
        if centered in ("in", "both"):
            source = f"torch.fft.ifftshift({source}, dim={dim})"
        n = v.shape[dim]
        if how == "irfft":
            m = self.draw(st.integers(1, 2 * n))
            call, bound = f"torch.fft.irfft({source}, n={m}, dim={dim}, norm={norm!r})", m * v.bound
        else:
            call, bound = f"torch.fft.{how}({source}, dim={dim}, norm={norm!r})", n * v.bound
        if centered in ("out", "both"):
            call = f"torch.fft.fftshift({call}, dim={dim})"
        self.emit(call, bound, signed=False)

    def op_roundtrip(self) -> None:
        v = self.pick()
        how = self.draw(st.sampled_from(["swap", "scale", "parts", "complex"] + ["bits"] * bool(v.shape)))
        if how == "bits":  # complex64's bits as float64 (one element size, any layout), reversed: z.flip(-1)
            self.emit(f"({v.name}.view(torch.float64).flip(-1).view(torch.complex64) if {v.name}.dtype == "
                      f"torch.complex64 else {v.name}.flip(-1))", v.bound, signed=v.signed)
        elif how == "swap":  # (re, im) -> (im, re) through the pairs
            self.emit(f"torch.view_as_complex(torch.view_as_real({v.name}).flip(-1).contiguous())", v.bound,
                      signed=v.signed)
        elif how == "scale":  # real arithmetic on the pairs (all real: no mixed real/complex op)
            self.emit(f"torch.view_as_complex(torch.view_as_real({v.name}) * 0.5)", v.bound, signed=v.signed)
        elif how == "parts":
            self.emit(f"torch.view_as_real({v.name})", v.bound, signed=v.signed)
        else:
            self.emit(f"torch.complex({v.name}.imag, {v.name}.real)", v.bound, signed=v.signed)

    def op_autograd(self) -> None:
        """What cuts, replaces or observes the gradient path (realify/engine/grad_semantics.py,
        realify/engine/custom_functions.py): a stop-gradient, a grad-mode region, a custom Function whose
        backward is not its forward's derivative, a hook on an intermediate."""
        v = self.pick()
        kinds = ["detach", "no_grad", "inference_mode", "set_grad_enabled", "reversal", "function", "passthrough"]
        if HAS_IN_GRAPH_HOOKS:
            kinds.append("hook")
        how = self.draw(st.sampled_from(kinds))
        if how == "reversal" and not v.finite:  # C99 addition (op_binary): the operands finite
            how = "detach"
        # An exported program keeps only the trace of the forward: a custom Function's backward,
        # an inference_mode region and a hook (registered where an input requires grad, which
        # no export's does) are lost in plain torch.export too. Such programs' exported values
        # are checked, their gradients not (programs()). no_grad and set_grad_enabled regions
        # are kept (wrap_with_set_grad_enabled in plain torch.export, a stop-gradient in
        # realify's program): their gradients are checked
        self.gradient_outside_trace |= how not in ("detach", "reversal", "no_grad", "set_grad_enabled")
        s = self.draw(st.sampled_from(SCALARS))
        scaled = v.bound * abs(s)
        if how == "detach":
            self.emit(f"{v.name}.detach()", v.bound, signed=v.signed)
        elif how == "no_grad":
            self.emit("", scaled, line=f"with torch.no_grad():\n    {{name}} = {v.name} * {s!r}", signed=v.signed)
        elif how == "inference_mode":  # an inference tensor is cloned before autograd reads it, as eager requires
            inside = f"with torch.inference_mode():\n    {{name}} = {v.name} * {s!r}"
            self.emit("", scaled, line=f"{inside}\n{{name}} = {{name}}.clone()", signed=v.signed)
        elif how == "set_grad_enabled":
            self.emit("", scaled, line=(f"torch.set_grad_enabled(False)\n{{name}} = {v.name} * {s!r}\n"
                                        "torch.set_grad_enabled(True)"), signed=v.signed)
        elif how == "reversal":
            self.emit(f"{v.name}.detach() * 2 - {v.name}", 3 * v.bound, signed=False)
        elif how == "function":
            self.emit(f"FuzzScaled.apply({v.name})", v.bound * abs(FuzzScaled.FACTOR), signed=v.signed)
        elif how == "passthrough":
            self.emit(f"FuzzPassThrough.apply({v.name})", v.bound, signed=v.signed)
        else:  # a hook: the gradient of every reader of the value, scaled and conjugated
            # (a program run without gradients, as the fuzzer's references are, registers none)
            # on a copy (an intermediate): not v * 1, a product with a real operand, which
            # realify takes per part (C99) and eager through a complex product
            self.emit("", v.bound, line=(f"{{name}} = {v.name}.clone()\nif {{name}}.requires_grad:\n"
                                         f"    {{name}}.register_hook(lambda g: g.conj() * {s!r})"), signed=v.signed)

    def op_control(self) -> None:
        """torch.cond or while_loop on a complex value, its result read on like any other
        (straight to the outputs, its parts by op_real). cond: both branches scale, one
        conjugates; its predicate holds for every finite value, so the perturbed runs that
        measure a program's condition take the branch the program takes. while_loop: one to
        three steps of a scale, conjugating or not."""
        v = self.pick()
        s = self.draw(st.sampled_from(SCALARS))
        # the operand detached: eager's own backward of cond fails under the reference runs'
        # modes (NotImplementedError) and of a complex while_loop everywhere (AssertionError), so
        # their gradients are tests/test_control_flow.py's. Before torch 2.14, dynamo itself
        # (every backend) fails on cond of a strided slice at symbolic sizes ("one of cond's
        # output stride is not a simple accumulative multiplication of sizes"): the operand is
        # made dense there
        operand = f"{v.name}.detach()" + (".contiguous()" if torch.__version__ < (2, 14) else "")
        if self.draw(st.sampled_from(["cond", "while_loop"])) == "while_loop":
            steps = self.draw(st.integers(1, 3))
            step = self.draw(st.sampled_from(["z", "z.conj()"]))
            self.emit(f"torch._higher_order_ops.while_loop(lambda i, z: i < {steps}, lambda i, z: (i + 1, {step} * "
                      f"{s!r}), (torch.tensor(0), {operand}))[1]", v.bound * abs(s) ** steps, signed=False)
            return
        taken = self.draw(st.sampled_from(["true", "false"]))
        pred = f"{v.name}.abs().sum() >= 0" if taken == "true" else f"{v.name}.abs().sum() < 0"
        self.emit(f"torch.cond({pred}, lambda z: z * {s!r}, lambda z: z.conj() * {s!r}, ({operand},))",
                  v.bound * abs(s), signed=False)

    def op_real(self) -> None:
        v = self.pick()
        fn = self.draw(st.sampled_from(["abs", "angle", "real", "imag"]))
        if fn == "angle" and not v.signed:  # a branch cut on the negative real axis
            fn = "abs"
        expr = f"{v.name}.{fn}" if fn in ("real", "imag") else f"torch.{fn}({v.name})"
        self.emit(expr, v.bound if fn != "angle" else math.pi, signed=v.signed)

    def op_inplace(self) -> None:
        v = self.pick()
        op = self.draw(st.sampled_from(["mul_", "add_", "sub_", "div_"]))
        w = self._zeros_meet_infinities_as_eagers(v, self.partner(v, finite=op in ("add_", "sub_")))  # op_binary
        if w.shape != v.shape and not _broadcasts_to(w.shape, v.shape):
            return self.op_binary()
        bound = v.bound + w.bound if op in ("add_", "sub_") else (v.bound * w.bound if op == "mul_" else INF)
        target = next((i for i in self.inputs if i.name == v.name), None)
        writable = (target is not None and self.allow_mutation and target.view in ("base", "base.conj()")
                    and target.alias_of is None and target.overlap_of is None
                    and not (KEEP_OFF["aliased_mutation"] and self._aliased(target.name)))
        signed = v.signed and w.signed and op == "mul_"
        if writable:  # into the argument itself: compared after the call
            self.mutated = True
            line = f"{v.name}.{op}({w.name})\n{{name}} = {v.name} * 1j"
            # a new value that reads the written argument, then the argument's own new bound
            out = self.emit("", bound * 1, line=line, signed=signed)
            v.bound, v.signed, v.overflows = bound, signed, self._overflows(bound)
            return out
        self.emit("", bound, line=f"{{name}} = {v.name}.clone()\n{{name}}.{op}({w.name})", signed=signed)

    def _zeros_meet_infinities_as_eagers(self, v: Var, w: Var) -> Var:
        """``w``, or a fresh finite input in its place where a non-finite operand would multiply
        a value whose zero parts may not be eager's (Var.signed)."""
        if (not w.finite and not v.signed) or (not v.finite and not w.signed):
            return self.new_input(w.shape, plain=True)
        return w

    def _aliased(self, name: str) -> bool:
        return any(i.alias_of == name or i.overlap_of == name or (i.name == name and (i.alias_of or i.overlap_of))
                   for i in self.inputs)


def _bound(values: list[complex], axis: str) -> float:
    """max |v| over the values an input is made of (the axis kinds keep one of their parts)."""
    parts = [(v.real if axis != "imag" else 0.0, v.imag if axis != "real" else 0.0) for v in values]
    if any(math.isnan(x) or math.isinf(x) for pair in parts for x in pair):
        return INF
    return max((math.hypot(*pair) for pair in parts), default=0.0)


def _exp(b: float) -> float:
    return math.exp(b) if b < 700 else INF


def _broadcasts_to(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    if len(shape) > len(target):
        return False
    return all(s in (1, t) for s, t in zip(reversed(shape), reversed(target)))


@st.composite
def programs(draw, dtypes=(C64, C128), mutation: bool = True, grads: bool = True, max_ops: int = 8,
             export: bool = False, control: bool = True, onnx_share: int = 6, every_front_end: bool = False) -> Program:
    """A program for realify.compile, or with ``export`` for realify.export too
    (check_every_front_end): no eager islands, and one complex64 program in ``onnx_share`` run
    in ONNX Runtime. ``every_front_end``: islands drawn, and a program without one exported too.
    ``control``: torch.cond."""
    dtype = draw(st.sampled_from(dtypes))
    b = Builder(draw, dtype, allow_special=True, allow_mutation=mutation, export=export, control=control)
    shape = draw(st.sampled_from([(), (3,), (2, 3), (1, 3), (3, 1), (2, 2, 3), (0,), (2, 0)]))
    b.new_input(shape)
    count = draw(st.integers(3, max_ops))
    for _ in range(count):
        b.step()
    values = [v for v in b.vars if v.name.startswith("v")]
    assume(values)  # every op drawn was one eager refuses: no program
    outputs = [values[-1].name] + [v.name for v in values[:-1] if draw(st.booleans()) and draw(st.booleans())]
    check_grads = grads and not b.mutated and not (KEEP_OFF["axis_gradients"] and b.has_axis_or_special)
    program = Program(dtype, b.inputs, b.lines, outputs, depth=count, mutates_inputs=b.mutated,
                      check_grads=check_grads, projection_seed=draw(st.integers(0, 2 ** 16)),
                      # dynamic=True for the largest draw: hypothesis's generation favours the
                      # smallest, and default settings (a recompile with symbolic sizes at the
                      # second shape) are the path most programs should take
                      dynamic=draw(st.integers(0, 2)) == 2, later_calls=draw(st.booleans()))
    if (export or every_front_end) and not b.has_island:
        # the other sizes: grown by a small and a larger step (and shrunk: check_export)
        steps = (draw(st.integers(1, 2)), draw(st.integers(3, 6)))
        # ONNX Runtime has no float64 Atan (docs/export.md "Limits"), which complex128's
        # log, sqrt, angle and pow reach through atan2: complex64 programs only
        onnx = dtype == C64 and draw(st.integers(0, onnx_share - 1)) == 0
        program = dataclasses.replace(program, gradient_outside_trace=b.gradient_outside_trace,
                                      export_dims=draw(st.sampled_from(["auto", "dynamic", "from 1"])),
                                      export_steps=steps, onnx_runtime=onnx)
    return program


# ---- running and comparing -------------------------------------------------------------------


def _classes(x: torch.Tensor) -> torch.Tensor:
    """Per real part: 0 finite, 1 nan, 2 +inf, 3 -inf."""
    cls = torch.zeros_like(x, dtype=torch.int8)
    cls[torch.isnan(x)] = 1
    cls[x == INF] = 2
    cls[x == -INF] = 3
    return cls


def _parts(x: torch.Tensor) -> torch.Tensor:
    x = x.detach()
    if x.is_complex():
        return torch.view_as_real(x.resolve_conj().resolve_neg())
    return x


def assert_matches(actual, expected, ref64, ref128, dtype, depth: int, what: str, spreads=(),
                   floor: float = 0.0) -> None:
    """Elementwise, per real part (see the module docstring for the bound and why).

    ``ref64``/``ref128``: eager's result of the same program in complex64 and complex128 (the
    measured condition); ``expected`` is eager's in ``dtype``. ``spreads``: more pairs of
    results whose difference is an error of complex64's size, measuring the condition where
    eager's pair is exact by luck: eager's complex128 result with and without one complex64
    rounding per op (Program.perturbed_function), realify's complex64 and complex128
    results (its own rounding, for gradients)."""
    eps = torch.finfo(torch.float32 if dtype == C64 else torch.float64).eps
    a, e = _parts(actual).double(), _parts(expected).double()
    r64, r128 = _parts(ref64).double(), _parts(ref128).double()
    assert a.shape == e.shape, f"{what}: shape {tuple(a.shape)} != eager's {tuple(e.shape)}"
    ca, ce, c64, c128 = _classes(a), _classes(e), _classes(r64), _classes(r128)
    complex_parts = expected.is_complex()
    finite64 = (c64 == 0) & (c128 == 0)
    measured = _modulus(torch.where(finite64, r64 - r128, 0.0), complex_parts)
    for first, second in spreads:
        o64, o128 = _parts(first).double(), _parts(second).double()
        both = finite64 & (_classes(o64) == 0) & (_classes(o128) == 0)
        measured = measured + _modulus(torch.where(both, o64 - o128, 0.0), complex_parts)
    if dtype == C128:
        measured = measured * (torch.finfo(torch.float64).eps / torch.finfo(torch.float32).eps)
    tiny = torch.finfo(torch.float32 if dtype == C64 else torch.float64).tiny
    tol = 8 * depth * eps * (_modulus(e, complex_parts) + floor) + 8 * measured + tiny
    close = (ca == ce) & ((ce != 0) | ((a - e).abs() <= tol))
    if dtype == C64:
        # eager's complex64 result is not what complex128 gives in kind: it overflowed (an
        # intermediate product of 1e30s: (-1e30 + 1e30i)^2 has real part 0, and eager's FMA
        # gives -inf where inf - inf gives nan), or a subnormal divisor made a nan. No
        # complex64 answer is right there; realify's must be complex128's, or fail as eager's
        # does (not finite), never a finite value complex128 does not give
        imprecise = c64 != c128
        tol128 = 8 * depth * eps * _modulus(r128, complex_parts) + tiny
        close |= imprecise & (ca == c128) & ((c128 != 0) | ((a - r128).abs() <= tol128))
        close |= imprecise & (ce != 0) & (ca != 0)
    if not bool(close.all()):
        bad = (~close).nonzero()[:5].tolist()
        rows = "\n".join(f"  at {tuple(i)}: realify {a[tuple(i)].item()!r}, eager {e[tuple(i)].item()!r}, "
                         f"eager complex128 {r128[tuple(i)].item()!r}, tolerance {tol[tuple(i)].item():.3g}"
                         for i in bad)
        raise AssertionError(f"{what}: {int((~close).sum())} of {close.numel()} parts differ from eager\n{rows}")


def _modulus(x: torch.Tensor, complex_parts: bool) -> torch.Tensor:
    """The scale errors are measured against: ``|x|`` of a real part; for a complex element,
    its modulus over its finite parts, for both parts. Complex arithmetic is accurate
    normwise, not per part: ``z / z`` is ``1 + 0i`` in realify and ``1 + 3e-9i`` in eager
    (docs/numerics.md, "Division"), a part far below the element's size."""
    x = torch.where(torch.isfinite(x), x, 0.0).abs()
    if not complex_parts:
        return x
    return torch.linalg.vector_norm(x, dim=-1, keepdim=True).expand(x.shape)


def _run_eager(program: Program, dtype: torch.dtype, grads: bool):
    fn = program.function()
    args, leaves = program.make_inputs(dtype, requires_grad=grads)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = fn(*args)
    return args, leaves, out


def _run_perturbed(program: Program, seed: int):
    """Eager's outputs in complex128 with one complex64 rounding per op (Program.perturbed_function)."""
    args, _ = program.make_inputs(C128)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        return program.perturbed_function(torch.finfo(torch.float32).eps, seed)(*args)


def _perturbed_grads(program: Program, seed: int) -> list[torch.Tensor]:
    """Eager's gradients in complex128 with one complex64 rounding per forward op: what a
    gradient that reads an ill-conditioned value (the square of a sum of 1e30s that cancel)
    may be, which eager's two precisions can miss by luck, as for outputs."""
    args, leaves = program.make_inputs(C128, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = program.perturbed_function(torch.finfo(torch.float32).eps, seed)(*args)
    return _grads(_projected_loss(out, program.projection_seed), leaves)


def _projected_terms(outputs, seed: int) -> list[torch.Tensor]:
    """Each differentiable output's random real projection (weights N(0, 1), drawn in order)."""
    gen = torch.Generator().manual_seed(seed)
    terms = []
    for o in tree_leaves(outputs):
        if isinstance(o, torch.Tensor) and (o.is_complex() or o.is_floating_point()) and o.requires_grad:
            p = torch.view_as_real(o.resolve_conj()) if o.is_complex() else o
            weights = torch.randn(p.shape, generator=gen, dtype=torch.float64).to(p.dtype)
            terms.append((p * weights).sum())
    return terms


def _projected_loss(outputs, seed: int) -> torch.Tensor:
    return sum(_projected_terms(outputs, seed), 0)


def _eager_grads_output_by_output(program: Program, dtype: torch.dtype, seed: int) -> list[torch.Tensor]:
    """Eager's gradient summed output by output: eager's own terms, added in another order."""
    _, leaves, out = _run_eager(program, dtype, True)
    total = [torch.zeros_like(leaf) for leaf in leaves]
    for term in _projected_terms(out, seed):
        grads = torch.autograd.grad(term, leaves, allow_unused=True, retain_graph=True)
        total = [t if g is None else t + g for t, g in zip(total, grads)]
    return total


def _largest_gradient_term(program: Program, dtype: torch.dtype, seed: int) -> float:
    """The largest finite modulus of a gradient term in eager's backward of the projected
    outputs: every gradient a backward node passes to one of its inputs, before terms for the
    same tensor are summed. A gradient that sums terms of size T carries rounding errors of
    about eps * T, whatever the size of the sum: d(a/a)/da at |a| = 1e-40 adds two terms of
    size 1e40 to a result of 0, and a different but equally accurate division leaves 1e24."""
    _, leaves, out = _run_eager(program, dtype, True)
    loss = _projected_loss(out, seed)
    if not isinstance(loss, torch.Tensor) or loss.grad_fn is None:
        return 0.0
    largest = [0.0]

    def record(grad_inputs, grad_outputs):
        for g in grad_inputs:
            if g is not None and g.numel():
                size = g.detach().abs().double()
                size = size[torch.isfinite(size)]
                if size.numel():
                    largest[0] = max(largest[0], float(size.max()))

    seen, stack = set(), [loss.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        node.register_hook(record)
        stack.extend(next_node for next_node, _ in node.next_functions)
    torch.autograd.grad(loss, leaves, allow_unused=True)
    return largest[0]


def _grads(loss, leaves):
    if not isinstance(loss, torch.Tensor):
        return [torch.zeros_like(leaf) for leaf in leaves]
    grads = torch.autograd.grad(loss, leaves, allow_unused=True)
    return [torch.zeros_like(leaf) if g is None else g for g, leaf in zip(grads, leaves)]


def check_every_front_end(program: Program, inner: str = "eager") -> str:
    """``program`` through realify.compile (check_program: at its example's shapes, then, where
    it says so, at two grown ones with symbolic sizes) and, where it has no eager island,
    through realify.export with every input dim dynamic and in ONNX Runtime (check_export)."""
    check_program(program, inner=inner)
    return check_export(program) if program.export_dims is not None else "compiled; no export (an eager island)"


def check_program(program: Program, inner: str = "eager") -> None:
    """Run ``program`` through realify.compile (``inner``) and eagerly; compare outputs,
    inputs after the call, and gradients of a random real projection of the outputs. A
    program with later calls runs the same compiled function again at its grown inputs
    (_later_sizes), where eager runs the program there (a slice or a literal size may not fit
    them)."""
    torch._dynamo.reset()
    function = program.function()
    compiled = _compiled(program, inner, function)

    def run(program: Program, dtype: torch.dtype, grads: bool):
        # another precision (a measure of realify's own rounding) compiled afresh
        return _call(compiled if dtype == program.dtype else _compiled(program, inner), program, dtype, grads)

    _check_call(program, run)
    later = [dataclasses.replace(program, sizes=sizes) for sizes in _later_sizes(program)]
    later = [call for call in later if program.later_calls and _eager_runs(call)]
    for call in later:
        _check_call(call, run)
    if later:
        _check_graph_count([program, *later], _graphs_kept(function))


def _graphs_kept(function) -> int:
    """The graphs dynamo keeps for ``function``: one per guard set, a recompile adds one."""
    return len(torch._dynamo.eval_frame._debug_get_cache_entry_list(function.__code__))


def _check_graph_count(calls: list[Program], realify_graphs: int) -> None:
    """No more graphs for the calls than the default backend's capture and autograd
    (AOTAutograd's eager backend) keep for the same calls: more would mean a rule fixed a
    symbolic size to a number (a recompile per size, and past dynamo's limit an eager run)."""
    program = calls[0]
    if KEEP_OFF["graphs_of_custom_functions"] and any(".apply(" in line for line in program.lines):
        return
    torch._dynamo.reset()
    function = program.function()
    baseline = torch.compile(function, backend="aot_eager", fullgraph=True, dynamic=program.dynamic or None)
    try:
        for call in calls:
            _call(baseline, call, call.dtype, call.check_grads)
    except Exception:  # the default backend's own failure: nothing to count against
        return
    baseline_graphs = _graphs_kept(function)
    assert realify_graphs <= baseline_graphs, (
        f"realify kept {realify_graphs} graphs for the calls at {len(calls)} sizes, the default backend "
        f"{baseline_graphs}")


def _eager_runs(program: Program) -> bool:
    try:
        _run_eager(program, program.dtype, False)
    except (RuntimeError, IndexError, ValueError):
        return False
    return True


def _check_call(program: Program, run) -> None:
    """One call of realify's program on ``program``'s inputs, against eager. ``run(program,
    dtype, grads)``: realify's outputs on fresh inputs of ``dtype``, and the leaves of those
    inputs (``dtype`` other than the program's: a measure of realify's own rounding)."""
    grads = program.check_grads
    dtype = program.dtype
    _, leaves_e, out_e = _run_eager(program, dtype, grads)
    _, leaves64, out64 = _run_eager(program, C64, grads)
    _, leaves128, out128 = _run_eager(program, C128, grads)
    out, leaves = run(program, dtype, grads)
    _check_outputs(program, out, (out_e, out64, out128))
    if program.mutates_inputs:
        for i, (leaf, le, l64, l128) in enumerate(zip(leaves, leaves_e, leaves64, leaves128)):
            assert_matches(leaf, le, l64, l128, dtype, program.depth, f"input base {i} after the call{_at(program)}")
    if grads:
        seed = program.projection_seed
        g = _grads(_projected_loss(out, seed), leaves)
        ge = _grads(_projected_loss(out_e, seed), leaves_e)
        g64 = _grads(_projected_loss(out64, seed), leaves64)
        g128 = _grads(_projected_loss(out128, seed), leaves128)
        own, perturbed_grads = None, _perturbed_grads(program, program.projection_seed)
        for i in range(len(g)):
            # only where eager's gradient is finite (a non-finite one has no defined value to match)
            finite = torch.isfinite(_parts(ge[i])).all(-1) if ge[i].is_complex() else torch.isfinite(ge[i])
            pick = lambda grads: grads[i][finite]  # noqa: B023  (called within the iteration)
            conditioned = [(pick(perturbed_grads), pick(g128))]
            try:
                assert_matches(pick(g), pick(ge), pick(g64), pick(g128), dtype, 2 * program.depth,
                               f"gradient of input base {i}{_at(program)}", spreads=conditioned)
            except AssertionError:
                # A gradient sums terms that may cancel (d(z/z)/dz = 1/z - z/z^2): eager's
                # formula can cancel exactly in both precisions, so its measured error is 0,
                # while realify's, rounded differently, leaves eps times the terms. Realify's
                # own measured error (its complex64 and complex128 gradients) counts too, and,
                # as either can cancel exactly by luck ((0.75j / 0.75j)' is 0 in eager and
                # 2e-16j in realify's complex128, 0 in its complex64), so does eps times the size
                # of the terms, bounded by 1 (the projection weights are N(0, 1)) and the
                # largest finite gradient term eager's backward passes along any edge of the
                # program (its inputs' gradients included: _largest_gradient_term).
                if own is None:
                    own = {dtype: g, **{d: _realify_grads(program, d, run) for d in (C64, C128) if d != dtype}}
                terms = max(1.0, _largest_gradient_term(program, dtype, seed))
                tolerance = dict(spreads=[*conditioned, (pick(own[C64]), pick(own[C128]))], floor=terms)
                try:
                    assert_matches(pick(g), pick(ge), pick(g64), pick(g128), dtype, 2 * program.depth,
                                   f"gradient of input base {i}{_at(program)}", **tolerance)
                except AssertionError:
                    # Terms larger than the result can absorb it: d(z/z)/dz's two terms of size
                    # 1/|z| (1e40 at |z| = 1e-40) plus another output's share w give 0 or w by
                    # the order of the sums alone, and eager's order is its engine's. Eager's
                    # gradients summed output by output, the same terms in another order, are
                    # eager's answer too.
                    alt = {d: _eager_grads_output_by_output(program, d, seed) for d in (C64, C128, dtype)}
                    assert_matches(pick(g), pick(alt[dtype]), pick(alt[C64]), pick(alt[C128]), dtype,
                                   2 * program.depth, f"gradient of input base {i}{_at(program)}", **tolerance)


def _compiled(program: Program, inner: str, function=None):
    function = program.function() if function is None else function
    return realify.compile(function, inner=inner, fullgraph=True, dynamic=program.dynamic or None)


def _call(compiled, program: Program, dtype: torch.dtype, grads: bool):
    """``compiled`` on fresh inputs of ``dtype``: its outputs, and the leaves of its inputs."""
    args, leaves = program.make_inputs(dtype, requires_grad=grads)
    with warnings.catch_warnings(), realify.config.patch(gemm_multiplications=4), \
            torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        # 4 real products per complex GEMM: its elementwise error bound is that of eager's
        # complex GEMM; the 3M (Gauss) default has a normwise bound (docs/numerics.md), tested
        # against that bound in tests/test_products.py, which this elementwise check cannot use
        warnings.simplefilter("ignore")
        return compiled(*args), leaves


def _check_outputs(program: Program, out, eagers, normwise: bool = False) -> None:
    """realify's outputs ``out`` against ``eagers``: eager's in the program's dtype, complex64
    and complex128 (from _run_eager); ``normwise``: each at the size of its largest element."""
    out_e, out64, out128 = eagers
    # eager's complex64 and complex128 results can agree exactly by luck where the condition
    # is large: z / z is exactly 1 + 0i in complex64 and 1 + 1e-16i in complex128 (or the
    # other way round), and an FFT of such quotients cancels to 0 or to 1e-16. One complex64
    # rounding per op, in complex128, measures that condition without luck
    perturbed = _run_perturbed(program, program.projection_seed)
    flat_out, flat_e = tree_leaves(out), tree_leaves(out_e)
    assert len(flat_out) == len(flat_e)
    at = _at(program)
    for i, (o, x, x64, x128, xp) in enumerate(zip(flat_out, flat_e, tree_leaves(out64), tree_leaves(out128),
                                                 tree_leaves(perturbed))):
        assert o.dtype == x.dtype, f"output {i}{at}: dtype {o.dtype} != eager's {x.dtype}"
        floor = float(_modulus(_parts(x).double(), x.is_complex()).max()) if normwise and x.numel() else 0.0
        assert_matches(o, x, x64, x128, program.dtype, program.depth, f"output {i}{at}", spreads=[(xp, x128)],
                       floor=floor)


def _at(program: Program) -> str:
    return f" at sizes {program.sizes}" if program.sizes else ""


def _realify_grads(program: Program, dtype: torch.dtype, run) -> list[torch.Tensor]:
    out, leaves = run(program, dtype, True)
    return _grads(_projected_loss(out, program.projection_seed), leaves)


# ---- the export front end --------------------------------------------------------------------


def check_export(program: Program) -> str:
    """Run ``program`` through realify.export with every input dim dynamic, then through
    ComplexCallAdapter at the example's sizes and at other sizes (export_sizes: grown by the
    program's steps, shrunk by one, and 1 where its ranges allow it), comparing outputs,
    inputs after the call and gradients with eager's as check_program does; and outputs in
    ONNX Runtime where the program says so. A size eager or plain torch.export's own program
    rejects is not checked. Returns the outcome, or torch.export's constraint violation where
    realify.export refuses to keep a dim dynamic (an outcome, not a failure: docs/export.md,
    "Dynamic shapes")."""
    program = dataclasses.replace(program, check_grads=program.check_grads and not program.gradient_outside_trace)
    module = ModuleOf(program.function())
    shapes, plain = _plain_export(module, program)
    if plain is None and (failure := _plain_static_export_failure(module, program)) is not None:
        # torch's own export fails on the program (torch.cond of a detached operand of inputs
        # that share memory, real programs too): realify.export, which exports the complex
        # program with torch.export first, fails the same way, never returns a program
        with pytest.raises(type(failure)):
            _export(module, program, program.dtype, shapes)
        return f"plain torch.export fails: {type(failure).__name__}"
    try:
        ep = _export(module, program, program.dtype, shapes)
    except UserError as refusal:
        assert refusal.error_type is UserErrorType.CONSTRAINT_VIOLATION, refusal
        return f"refused: {refusal}"
    if plain is not None:
        # the real program's complex inputs carry a trailing static 2
        for i, (want, have) in enumerate(zip(dynamic_input_dims(plain), dynamic_input_dims(ep))):
            assert have[: len(want)] == want, (
                f"input {i}: dims {want} are dynamic in plain torch.export, realify.export keeps {have[: len(want)]}")
    adapters = {program.dtype: realify.ComplexCallAdapter(ep)}

    def run(other: Program, dtype: torch.dtype, grads: bool):
        # another precision (a measure of realify's own rounding) exported afresh, at the example's sizes
        if dtype not in adapters:
            adapters[dtype] = realify.ComplexCallAdapter(_export(module, program, dtype, shapes))
        args, leaves = other.make_inputs(dtype, requires_grad=grads)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return adapters[dtype](*args), leaves

    session, outcome = None, "checked"
    if program.onnx_runtime:
        try:
            session = onnx_session(ep)
        except NotImplementedError as refusal:  # NoOnnxFormError: no size-independent ONNX form, named
            outcome = f"checked; ONNX refused: {refusal}"
    sizes_to_try = (export_sizes(plain, program.make_inputs()[0], steps=program.export_steps, shrink=True)
                    if plain is not None else [])
    if KEEP_OFF["size_one_of_contractions"] and any("einsum" in line or " @ " in line for line in program.lines):
        sizes_to_try = [sizes for sizes in sizes_to_try if set(sizes.values()) != {1}]
    others = [dataclasses.replace(program, sizes=sizes) for sizes in sizes_to_try]
    calls = [program] + [other for other in others if _plain_takes(plain.module(), other)]
    # ONNX Runtime's DFT is not eager's FFT: its error at a length of 7 reaches a few eps of
    # the transform's largest values in elements far smaller, so a program with an FFT is
    # compared there normwise (realify's own program runs eager's FFT: per element)
    normwise = any("torch.fft." in line for line in program.lines)
    for call in calls:
        _check_call(call, run)
        if session is not None and not _changes_rank_in_onnx(program, call):
            outputs = run_session(session, ep, call.make_inputs()[0])
            if normwise and not _finite_inputs(call):
                # a transform of a NaN or an infinity: which outputs it reaches is the FFT
                # algorithm's (ONNX Runtime's DFT spreads a NaN over the whole transform, eager's
                # butterflies keep some parts finite; docs/limits.md): the model runs, at eager's shapes
                eager = [x for x in tree_leaves(_run_eager(call, call.dtype, False)[2]) if isinstance(x, torch.Tensor)]
                assert [tuple(o.shape) for o in outputs] == [tuple(e.shape) for e in eager]
                continue
            eagers = [_run_eager(call, dtype, False)[2] for dtype in (call.dtype, C64, C128)]
            _check_outputs(call, outputs, eagers, normwise)
    if any(i.alias_of is not None for i in program.inputs):
        _check_unshared_call_refused(program, adapters[program.dtype])
    return f"{outcome} at {len(calls)} sizes"


def _check_unshared_call_refused(program: Program, adapter: realify.ComplexCallAdapter) -> None:
    """A program exported with one tensor passed twice, called with a tensor of its own for
    each: where the exported trace reads both through one placeholder, the adapter refuses the
    call rather than read one in place of the other."""
    args = program.make_inputs()[0]
    if all(a.numel() == 0 for a in args if isinstance(a, torch.Tensor)):
        return  # no values to read in place of others
    if not adapter._traced_sharing:
        return  # traced as separate tensors (torch.export read each placeholder)
    separate = [a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args]
    with warnings.catch_warnings(), pytest.raises(RealifyError, match="were one tensor when the program was exported"):
        warnings.simplefilter("ignore")
        adapter(*separate)


def _finite_inputs(call: Program) -> bool:
    # isfinite of a complex value: both parts finite (a conj view too, which view_as_real refuses)
    return all(torch.isfinite(x).all() for x in call.make_inputs()[0] if isinstance(x, torch.Tensor))


def _changes_rank_in_onnx(program: Program, call: Program) -> bool:
    """A call at size 1 of a program that squeezes without dims (KEEP_OFF["onnx_rank_changing_squeeze"])."""
    return (KEEP_OFF["onnx_rank_changing_squeeze"] and any(".squeeze()" in line for line in program.lines)
            and 1 in (call.sizes or {}).values())


def _plain_export(module: torch.nn.Module, program: Program):
    """(dynamic_shapes, plain torch.export's program) for ``program``: every input dim
    Dim.DYNAMIC or a Dim from 1 up where the program asks for it and plain torch.export takes
    it, else Dim.AUTO;
    (None, None) where plain torch.export fails with dynamic dims or keeps none: realify.export
    is then checked at the example's sizes, with static ones."""
    args = program.make_inputs()[0]
    dynamic = tuple({d: Dim.DYNAMIC if n >= 2 else Dim.AUTO for d, n in enumerate(t.shape)} for t in args)
    asked = {"dynamic": (dynamic,), "from 1": (from_one_shapes(args),)}.get(program.export_dims, ())
    for shapes in (*asked, auto_shapes(args)):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                plain = torch.export.export(module, tuple(args), dynamic_shapes=(shapes,))
        except Exception:
            # Dim.DYNAMIC where the program ties a dim to a number: torch.export's constraint
            # violation; plain torch.export failing otherwise leaves only a static export to check
            continue
        if any(any(flags) for flags in dynamic_input_dims(plain)):
            return (shapes,), plain
    return None, None


def _plain_static_export_failure(module: torch.nn.Module, program: Program) -> Exception | None:
    """What plain torch.export raises on ``program`` at static sizes; None where it exports it."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.export.export(module, tuple(program.make_inputs()[0]))
    except Exception as failure:
        return failure
    return None


def _export(module: torch.nn.Module, program: Program, dtype: torch.dtype, shapes):
    args = program.make_inputs(dtype)[0]
    # 4 real products per complex GEMM, as _call's compiles: the exported graph is decomposed here
    with warnings.catch_warnings(), realify.config.patch(gemm_multiplications=4):
        warnings.simplefilter("ignore")
        return realify.export(module, tuple(args), dynamic_shapes=shapes)


def _plain_takes(module: torch.nn.Module, program: Program) -> bool:
    """Whether eager takes ``program``'s inputs and ``module`` (plain torch.export's program)
    gives eager's result on them (realify/tools/symbolic_sizes.py ``plain_takes``): its own
    run-time checks of sizes may reject them, or a size outside its ranges meet a trace that
    assumed otherwise, and then realify's program is not asked to take them either."""
    try:
        _, _, expected = _run_eager(program, program.dtype, False)
    except (RuntimeError, IndexError, ValueError):
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return plain_takes(module, program.make_inputs()[0], expected)


# ---- the bounded run (default suite) and the long run ----------------------------------------

_COMMON = dict(derandomize=True, deadline=None, database=None, print_blob=False,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])


# Each program through every front end: compiled (at three shapes where drawn so) and, without
# an eager island, exported with every input dim dynamic and called at other sizes, one
# complex64 program in six in ONNX Runtime (an export takes about a second, an ONNX export
# seconds: 200 programs take about 7 minutes on two cores)
@settings(max_examples=int(os.environ.get("REALIFY_FUZZ_EXAMPLES", "200")), **_COMMON)
@given(programs(every_front_end=True))
def test_fuzz_eager_inner(program):
    check_every_front_end(program, inner="eager")


# Inductor compiles take seconds each (about 10 s for a program and its backward on 2 cores):
# the bounded run checks forward values of shorter programs; the long run checks gradients too
@settings(max_examples=int(os.environ.get("REALIFY_FUZZ_INDUCTOR_EXAMPLES", "12")), **_COMMON)
@given(programs(mutation=False, grads=False, max_ops=5))
def test_fuzz_inductor(program):
    check_program(program, inner="inductor")


# The long runs take each program through every front end: compiled (at three shapes where
# drawn so) and, without an eager island, exported with dynamic dims (one complex64 program in
# six in ONNX Runtime)
@pytest.mark.fuzz_long
@settings(max_examples=2000, **{**_COMMON, "derandomize": False})
@given(programs(every_front_end=True))
def test_fuzz_long_eager_inner(program):
    check_every_front_end(program, inner="eager")


@pytest.mark.fuzz_long
@settings(max_examples=200, **{**_COMMON, "derandomize": False})
@given(programs(every_front_end=True))
def test_fuzz_long_inductor(program):
    check_every_front_end(program, inner="inductor")


@pytest.mark.fuzz_long
@settings(max_examples=500, **{**_COMMON, "derandomize": False})
@given(programs(export=True))
def test_fuzz_long_export(program):
    check_every_front_end(program)


# ---- regressions: bugs the fuzzer found, reduced ------------------------------------------


def test_expanded_reshape_and_view_outputs(fresh_dynamo):
    def program(a):
        return a.expand(2, 3).reshape(-1), a.expand(2, 3)

    a = torch.randn(3, dtype=C64)
    got = realify.compile(program, inner="eager")(a)
    for x, y in zip(got, program(a)):
        torch.testing.assert_close(x, y, rtol=0, atol=0)


def test_absorbed_gradient_terms_match_an_order_of_eagers_sums(fresh_dynamo):
    # d(a/a)/da has two terms of size 1e40 at a = 1e-40j; with another output's share w (from
    # a.unsqueeze(0)) eager's engine sums (w + t) - t = 0, and a compiled backward may sum
    # w + (t - t) = w. Both are eager's terms; the check accepts either order.
    program = Program(dtype=C128, inputs=[Input("a", (3,), [0j, 0j, 1e-40j], base_shape=(3,))],
                      lines=["v0 = a / a", "v1 = a.unsqueeze(0)"], outputs=["v1", "v0"], depth=2)
    check_program(program, inner="eager")


def test_gradients_reading_a_cancelling_sum_are_compared_at_their_condition(fresh_dynamo):
    # the square of a sum of -1e30, 1e30 and 2.34, twice: the sum is 0, 2.34 or 4.68 by the
    # order of its additions, and so is half the square's gradient; eager's complex64 and
    # complex128 sums agree by luck, so only the perturbed program measures the condition
    program = Program(dtype=C128, inputs=[Input("a", (3, 1), [-1e30 + 0j, 1e30 + 0j, 2.340839147567749 + 0j],
                                                base_shape=(3, 1))],
                      lines=["v0 = torch.cat([a, a], dim=0)", "v1 = v0.sum(dim=0, keepdim=True)", "v2 = v1 ** 2"],
                      outputs=["v2"], depth=3)
    check_program(program, inner="eager")


def test_cancelling_sums_of_quotients_are_compared_at_their_condition(fresh_dynamo):
    # fft(a / a): the quotients are 1 + 0i exactly in realify and 1 + 1e-16i in eager's
    # complex128 but exact in its complex64, so eager's two precisions measure no condition
    # for the bins that cancel to 0 (realify 0, eager -7.3e-17); one complex64 rounding per
    # op, in complex128, measures it
    values = [2.2056167125701904 - 1.5365347862243652j, -1.0487737655639648 + 2.222827434539795j,
              -1.8535974025726318 + 0.4050644338130951j]
    program = Program(dtype=C128, inputs=[Input("a", (3,), values, base_shape=(3,))],
                      lines=["v0 = a / a", "v1 = torch.fft.fft(v0, dim=0)"], outputs=["v1"], depth=2,
                      check_grads=False)
    check_program(program, inner="eager")


def test_gradient_terms_that_cancel_are_compared_at_their_own_size(fresh_dynamo):
    # d(a/a)/da = 1/a - a/a^2 at a = -1e-40: two terms of size 1e40 (times the projection's
    # weight) that eager's formula cancels exactly and realify's division leaves -1.2e24 of
    # (eps times the terms). Neither is more accurate; the check compares at the size of the
    # terms, not of the sum.
    program = Program(dtype=C128, inputs=[Input("a", (1,), [-1e-40 + 0j], base_shape=(1,))],
                      lines=["v0 = a / a"], outputs=["v0"], depth=1, projection_seed=1)
    check_program(program, inner="eager")


def test_branch_cuts_take_only_values_signed_as_eagers(fresh_dynamo):
    # eager's vectorized complex neg is 0 - x: -(x + 0i) keeps +0 in vector lanes and gets -0
    # in the scalar tail, so log(neg(a)) of a real-axis a is +-i pi by position in eager, -i pi
    # everywhere in realify (and C99). Such a value never reaches a function with a branch cut
    # in a generated program; realify matches eager's scalar path.
    x = torch.tensor([0.41, -2.7, 2.1, 1.05, 0.5, -1.3, 0.25, 3.0, 1.5, -0.5, 2.0, 0.75])
    a = torch.complex(x, torch.zeros_like(x))
    got = realify.compile(lambda a: torch.log(torch.neg(a)), inner="eager", fullgraph=True)(a)
    expected = torch.stack([torch.log(torch.neg(a[i:i + 1]))[0] for i in range(len(x))])  # scalar path
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=0)
    assert bool((got.imag[x > 0] < 0).all())


def test_division_zeros_never_meet_infinities(fresh_dynamo):
    # z / z is exactly 1 + 0i in realify and 1 + tiny i in eager (docs/numerics.md); times
    # (0 - inf i) that is nan against eager's -inf. Generated programs keep such values away
    # from non-finite factors; realify keeps its exact quotient
    a = torch.tensor([2.9189138412475586 + 5.960464477539063e-08j], dtype=C64)
    q = realify.compile(lambda a: a / a, inner="eager", fullgraph=True)(a)
    assert q.item() == 1 + 0j


def test_overflowing_square_is_c99s(fresh_dynamo):
    # (-2.5e29 - 1.5e30i)^2 overflows complex64: C99's formula gives nan + inf i (re = inf - inf),
    # as realify and eager's scalar complex product do; eager's vectorized pow (FMA) gives
    # -inf + inf i. Generated programs return such values but use them no further, where a
    # function (tanh) could map the two to nan and -1
    z = torch.tensor([complex(-0.25e30, -1.5e30)], dtype=C64)
    got = realify.compile(lambda z: z * z, inner="eager", fullgraph=True)(z)
    assert torch.isnan(got.real).all() and (got.imag == INF).all()
    assert torch.isnan((z * z).real).all()  # eager's scalar path agrees


def test_a_custom_function_under_dynamic_true_keeps_the_default_backends_graph_count(fresh_dynamo):
    def program(a):
        return FuzzPassThrough.apply(torch.exp(a))

    compiled = realify.compile(program, inner="eager", dynamic=True, fullgraph=True)
    for shape in ((2, 3), (4, 6)):
        a = torch.randn(*shape, dtype=C64, requires_grad=True)
        torch.testing.assert_close(compiled(a), program(a))
    assert _graphs_kept(program) == 1  # the default backend's capture keeps one for both sizes
