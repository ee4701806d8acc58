"""Pointwise rules whose gradient is the function's derivative, whatever branch computed the value.

A rule's values come from special-value code: signed zeros picked with ``where``, ``copysign``,
exact results on the axes, Kahan's forms near branch cuts. Differentiated as written, that code
gives the derivative of the code, not of the function: on the real axis (every complex tensor
made from real data) ``sin``'s imaginary part is ``where(y == 0, y, ...)``, whose derivative in
``x`` is 0 where ``cos x sinh y`` has ``cosh y``... and the gradient loses a part. Eager PyTorch
differentiates a complex op by the formula in its ``derivatives.yaml``, never through the kernel.

realify does the same. A rule that computes with a :class:`Formula` (:func:`apply`), and the
rule of every function of one complex argument declared with its derivative
(:class:`OneArgument`, ``register(op, derivative=...)``), runs as the custom op
``realify::pointwise(name, parts, constants)``:

- forward: the rule's planar kernel (``Formula.values``). Inductor and every other consumer
  see the kernel's real ops: the op is decomposed into them below autograd
  (:func:`decompositions`), so the forward graph is what the kernel alone would give;
- backward: the formula (``Formula.vjp``), written with the same expressions, in the same
  order, as eager's formula for the op (``grad * conj(f'(z))`` for a holomorphic ``f``), on
  values computed by rules that are themselves such ops, so second derivatives are the
  function's too.

The derivative therefore matches eager's on the axes, on both sides of every branch cut and at
±0, ±inf and nan, and the backward graph is the formula's few ops instead of the kernel's
special-value code differentiated.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import torch
from torch._ops import OpOverload

from ..runtime.complex_tensor import ComplexTensor
from ._algebra import cdiv, cmul
from ._families import load_families
from ._operands import parts

Tensor = torch.Tensor


class C(NamedTuple):
    """A complex value as its planar parts, with the arithmetic the formulas are written in
    (complex multiplication and Smith's division as the rules compute them)."""

    re: Tensor
    im: Tensor

    def conj(self) -> C:
        return C(self.re, -self.im)

    def __add__(self, other) -> C:
        o = _lift(other)
        return C(self.re + o.re, self.im + o.im)

    __radd__ = __add__

    def __sub__(self, other) -> C:
        if isinstance(other, numbers.Number):
            # eager subtracts a number by adding (-1 + 0i) times it: z - 1 has imaginary part
            # y + 0, so +0 where y = -0 (this picks the side of a cut in acosh's formula)
            return self + complex(-1.0, 0.0) * complex(other)
        o = _lift(other)
        return C(self.re - o.re, self.im - o.im)

    def __rsub__(self, other) -> C:
        return _lift(other) - self

    def __neg__(self) -> C:
        return C(-self.re, -self.im)

    def __mul__(self, other) -> C:
        o = _lift(other)
        return C(*cmul(self.re, self.im, o.re, o.im))

    __rmul__ = __mul__

    def __truediv__(self, other) -> C:
        o = _lift(other)
        return C(*cdiv(self.re, self.im, o.re, o.im))

    def __rtruediv__(self, other) -> C:
        return _lift(other) / self


def _lift(x) -> C:
    """A formula's number as a complex value: eager promotes a Python scalar to a complex one
    (imaginary part +0) before the complex kernel, and so do the formulas, so that infinities
    meet the same zeros as in eager."""
    if isinstance(x, C):
        return x
    if isinstance(x, numbers.Number):
        z = complex(x)
        return C(z.real, z.imag)
    raise TypeError(f"a derivative formula cannot use {type(x).__name__}")


def select(condition: Tensor, a: C | complex, b: C | complex) -> C:
    """``where(condition, a, b)`` of complex values, part by part (a number as ``complex(number)``)."""
    a, b = _lift(a), _lift(b)
    return C(torch.where(condition, a.re, b.re), torch.where(condition, a.im, b.im))


@dataclasses.dataclass(frozen=True)
class Formula:
    """A pointwise kernel and its gradient, known to ``realify::pointwise`` by ``name`` (the name
    a graph holds: one formula per name).

    ``values(parts, constants)`` maps the flat real parts of the complex inputs (re, im of
    each, broadcast to one shape) to the flat real outputs (re, im of a complex result, or one
    real tensor). ``vjp(inputs, outputs, grad, constants)`` maps them (inputs as :class:`C`,
    outputs as :class:`C` or a real tensor, ``grad`` likewise) to the gradient of each input
    (a :class:`C`), in PyTorch's convention: ``dL/dRe z + i dL/dIm z``.

    A formula is a value: a rule that computes with it (:func:`apply`) is what enters the rule
    table; the functions of one complex argument are declared with their rule
    (:class:`OneArgument`)."""

    name: str
    values: Callable[[Sequence[Tensor], Sequence[float]], Sequence[Tensor]]
    vjp: Callable[..., Sequence[C]]

    def __post_init__(self) -> None:
        if _BY_NAME.setdefault(self.name, self) is not self:
            raise ValueError(f"a derivative formula named {self.name!r} exists already")

    def release(self) -> None:
        """Give up the name, for a formula that replaces this one (``register(...,
        override=True)`` of a function of one complex argument)."""
        if _BY_NAME.get(self.name) is self:
            del _BY_NAME[self.name]


# every formula by its name, for realify::pointwise to find the one a graph names
_BY_NAME: dict[str, Formula] = {}


def _formula(name: str) -> Formula:
    load_families()  # a graph may run before any rule was looked up: the families declare the formulas
    return _BY_NAME[name]


@torch.library.custom_op("realify::pointwise", mutates_args=())
def pointwise(name: str, parts: list[Tensor], constants: list[float]) -> list[Tensor]:
    # the kernel of the formula named ``name`` on the planar parts; outputs are fresh tensors (a custom
    # op may not return its inputs)
    outs = _formula(name).values(parts, constants)
    return [o.clone() if any(o is p for p in parts) else o for o in outs]


@pointwise.register_fake
def _(name, parts, constants):
    return list(_formula(name).values(parts, constants))


def _setup(ctx, inputs, output) -> None:
    ctx.name, parts, ctx.constants = inputs
    ctx.inputs = len(parts)
    ctx.save_for_backward(*parts, *output)


def _backward(ctx, grads):
    saved = ctx.saved_tensors
    parts, outs = saved[:ctx.inputs], saved[ctx.inputs:]
    f = _formula(ctx.name)
    inputs = [C(parts[i], parts[i + 1]) for i in range(0, len(parts), 2)]
    if len(outs) == 2:  # a complex result's parts
        outputs, grad = C(*outs), C(*grads)
    else:
        (outputs,), (grad,) = outs, grads
    flat = []
    for g in f.vjp(inputs, outputs, grad, ctx.constants):
        flat += [g.re, g.im]
    return None, [p.expand_as(q) if p.shape != q.shape else p for p, q in zip(flat, parts)], _no_gradient(ctx.constants)


def _no_gradient(constants: list[float]):
    # the constants get no gradient: autograd wants an empty list for an empty list, and a
    # single None for a list of floats (one non-tensor argument)
    return [] if not constants else None


pointwise.register_autograd(_backward, setup_context=_setup)


def apply(formula: Formula, *inputs: C, constants: Sequence[float] = ()) -> C | Tensor:
    """``formula``'s function of complex ``inputs`` (broadcast to one shape), with its gradient;
    a complex result as :class:`C`, a real one as a tensor."""
    parts = torch.broadcast_tensors(*(p for z in inputs for p in (z.re, z.im)))
    out = pointwise(formula.name, list(parts), [float(c) for c in constants])
    return C(*out) if len(out) == 2 else out[0]


@dataclasses.dataclass(frozen=True)
class OneArgument:
    """A pointwise function of one complex argument, declared once (``register(op,
    derivative=...)``, realify/rules/_registry.py): the rule of ``op``, and everything the front
    ends and the tests need to know of the function.

    ``kernel(x, y)`` maps the planar parts of ``z = x + iy`` to the result's ``(re, im)``, or to
    one real tensor; ``derivative(g, z, w)`` is the gradient of ``z`` (a :class:`C`) for the
    output gradient ``g`` and the result ``w``, eager's formula; ``real_operand(x)`` is the
    rule's value for a real operand ``x`` (None: the function of ``x + 0i``);
    ``eager_by_formula`` says whether the eager ComplexTensor front end differentiates the
    function by this formula rather than by PyTorch's (realify/tensor.py)."""

    op: OpOverload
    kernel: Callable[[Tensor, Tensor], Any]
    derivative: Callable[[C, C, Any], C]
    real_operand: Callable[[Tensor], Any] | None = None
    eager_by_formula: bool = True

    def __post_init__(self) -> None:
        kernel, derivative = self.kernel, self.derivative
        formula = Formula(self.name, lambda parts, _: _outputs(kernel(*parts)),
                          lambda inputs, w, g, _: [derivative(g, inputs[0], w)])
        object.__setattr__(self, "formula", formula)
        # the rule is named as its kernel where the table names rules (errors, realify.explain)
        for attribute in ("__module__", "__name__", "__qualname__"):
            object.__setattr__(self, attribute, getattr(kernel, attribute))

    @property
    def name(self) -> str:
        """The function's name: its op's (``exp``), which is also the public function's
        (``torch.exp``) and the formula's in a graph (``realify::pointwise('exp', ...)``)."""
        return self.op.overloadpacket.__name__

    def __call__(self, operand: Any) -> Any:
        """The rule: the function of ``operand``, through ``realify::pointwise``."""
        re, im = parts(operand)
        if im is None and self.real_operand is not None:
            return self.real_operand(re)
        out = self.of(C(re, torch.zeros_like(re) if im is None else im))
        return ComplexTensor(*out) if isinstance(out, C) else out

    def of(self, z: C) -> C | Tensor:
        """The function of a complex value, with this derivative (for formulas that use it)."""
        return apply(self.formula, z)


def _outputs(result: Any) -> list[Tensor]:
    """A kernel's result as the custom op's flat outputs: (re, im), or the one real tensor."""
    return [result] if isinstance(result, Tensor) else list(result)


def decompositions() -> dict:
    """``realify::pointwise`` as its kernel's real ops, for tracers below autograd (AOTAutograd
    with Inductor, export for ONNX), which then never see the op itself."""

    def values(name, parts, constants):
        return list(_formula(name).values(parts, constants))

    return {torch.ops.realify.pointwise.default: values}
