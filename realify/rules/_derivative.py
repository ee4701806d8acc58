"""Pointwise rules whose gradient is the function's derivative, whatever branch computed the value.

A rule's values come from special-value code: signed zeros picked with ``where``, ``copysign``,
exact results on the axes, Kahan's forms near branch cuts. Differentiated as written, that code
gives the derivative of the code, not of the function: on the real axis (every complex tensor
made from real data) ``sin``'s imaginary part is ``where(y == 0, y, ...)``, whose derivative in
``x`` is 0 where ``cos x sinh y`` has ``cosh y``... and the gradient loses a part. Eager PyTorch
differentiates a complex op by the formula in its ``derivatives.yaml``, never through the kernel.

realify does the same. A rule that registers a :class:`Formula` runs as the custom op
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
import math
import numbers
from typing import Callable, NamedTuple, Sequence

import torch

from ._algebra import cdiv, cmul

Tensor = torch.Tensor


class C(NamedTuple):
    """A complex value as its planar parts, with the arithmetic the formulas are written in
    (complex multiplication and Smith's division as the rules compute them)."""

    re: Tensor
    im: Tensor

    def conj(self) -> "C":
        return C(self.re, -self.im)

    def __add__(self, other) -> "C":
        o = _lift(other)
        return C(self.re + o.re, self.im + o.im)

    __radd__ = __add__

    def __sub__(self, other) -> "C":
        if isinstance(other, numbers.Number):
            # eager subtracts a number by adding (-1 + 0i) times it: z - 1 has imaginary part
            # y + 0, so +0 where y = -0 (this picks the side of a cut in acosh's formula)
            return self + complex(-1.0, 0.0) * complex(other)
        o = _lift(other)
        return C(self.re - o.re, self.im - o.im)

    def __rsub__(self, other) -> "C":
        return _lift(other) - self

    def __neg__(self) -> "C":
        return C(-self.re, -self.im)

    def __mul__(self, other) -> "C":
        o = _lift(other)
        return C(*cmul(self.re, self.im, o.re, o.im))

    __rmul__ = __mul__

    def __truediv__(self, other) -> "C":
        o = _lift(other)
        return C(*cdiv(self.re, self.im, o.re, o.im))

    def __rtruediv__(self, other) -> "C":
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


@dataclasses.dataclass(frozen=True)
class Formula:
    """A pointwise rule's planar kernel and its gradient.

    ``values(parts, constants)`` maps the flat real parts of the complex inputs (re, im of
    each, broadcast to one shape) to the flat real outputs (re, im of a complex result, or one
    real tensor). ``vjp(inputs, outputs, grad, constants)`` maps them (inputs as :class:`C`,
    outputs as :class:`C` or a real tensor, ``grad`` likewise) to the gradient of each input
    (a :class:`C`), in PyTorch's convention: ``dL/dRe z + i dL/dIm z``."""

    values: Callable[[Sequence[Tensor], Sequence[float]], Sequence[Tensor]]
    vjp: Callable[..., Sequence[C]]
    complex_output: bool = True


FORMULAS: dict[str, Formula] = {}


def _formula(name: str) -> Formula:
    from ._registry import load_families  # the rule families register their formulas on import

    load_families()
    return FORMULAS[name]


def formula(name: str, values, vjp, complex_output: bool = True) -> None:
    """Register the kernel ``values`` and its gradient ``vjp`` under ``name``."""
    if name in FORMULAS:
        raise ValueError(f"a derivative formula named {name!r} exists already")
    FORMULAS[name] = Formula(values, vjp, complex_output)


@torch.library.custom_op("realify::pointwise", mutates_args=())
def pointwise(name: str, parts: list[Tensor], constants: list[float]) -> list[Tensor]:
    # the kernel FORMULAS[name].values on the planar parts; outputs are fresh tensors (a custom
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
    if f.complex_output:
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


def apply(name: str, *inputs: C, constants: Sequence[float] = ()) -> C | Tensor:
    """The registered function ``name`` of complex ``inputs`` (broadcast to one shape), with its
    registered gradient; a complex result as :class:`C`, a real one as a tensor."""
    parts = torch.broadcast_tensors(*(p for z in inputs for p in (z.re, z.im)))
    out = pointwise(name, list(parts), [float(c) for c in constants])
    return C(*out) if _formula(name).complex_output else out[0]


def holomorphic(name: str, kernel: Callable[[Tensor, Tensor], tuple[Tensor, Tensor]],
                grad: Callable[[C, C, C], C]) -> None:
    """Register a complex function of one complex argument: ``kernel(x, y) -> (re, im)`` and
    ``grad(g, z, w) -> grad_z`` for the output gradient ``g``, input ``z`` and result ``w``."""
    formula(name, lambda parts, _: kernel(*parts), lambda inputs, w, g, _: [grad(g, inputs[0], w)])


def decompositions() -> dict:
    """``realify::pointwise`` as its kernel's real ops, for tracers below autograd (AOTAutograd
    with Inductor, export for ONNX), which then never see the op itself."""

    def values(name, parts, constants):
        return list(_formula(name).values(parts, constants))

    return {torch.ops.realify.pointwise.default: values}


LN2 = math.log(2.0)
LN10 = math.log(10.0)


# The functions of one complex argument that the eager front end (realify/tensor.py)
# differentiates by their formula rather than by PyTorch's
UNARY_FUNCTIONS = ("exp", "exp2", "expm1", "log", "log1p", "log2", "log10", "sqrt", "rsqrt", "sin", "cos",
                   "tan", "sinh", "cosh", "tanh", "asin", "acos", "atan", "asinh", "acosh", "atanh", "sigmoid",
                   "sinc", "reciprocal", "sgn", "abs", "angle")
