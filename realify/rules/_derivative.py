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
from ._operands import on_device, parts

Tensor = torch.Tensor


class C(NamedTuple):
    """A complex value as its planar parts, with the arithmetic the formulas are written in.

    Complex multiplication and Smith's division are computed as the rules compute them; a
    Python number is promoted as eager promotes it (imaginary part +0).
    """

    re: Tensor
    im: Tensor

    def conj(self) -> C:
        """Return the complex conjugate."""
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
    """Return a formula's number as a complex value.

    Eager promotes a Python scalar to a complex one (imaginary part +0) before the complex
    kernel, and so do the formulas, so that infinities meet the same zeros as in eager.
    """
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
    """A pointwise kernel of complex inputs and the formula of its gradient, known by name.

    A rule whose values come from special-value code (signed zeros picked with ``where``,
    exact results on the axes, branch-cut forms) computes with a formula through
    :func:`apply`: the kernel gives the values, and the gradient is the formula's, whatever
    branch computed the value. Both run as the custom op ``realify::pointwise``, which finds
    the formula by ``name`` (the name a graph holds: one formula per name).

    Attributes
    ----------
    name : str
        The formula's name, unique in the process (``"pow"``, ``"logaddexp"``).
    values : callable
        The kernel, ``values(parts, constants) -> outputs``: the flat real parts of the
        complex inputs (``re``, ``im`` of each, broadcast to one shape) and the constants (a
        list of floats) to the flat real outputs (``re``, ``im`` of a complex result, or one
        real tensor).
    vjp : callable
        The gradient, ``vjp(inputs, outputs, grad, constants) -> grads``: the inputs as
        complex values (``C``, with ``.re``, ``.im`` and complex arithmetic), the outputs and
        their gradient ``grad`` likewise (or real tensors, for a real result), and the
        constants, to the gradient of each input as a complex value, in PyTorch's convention
        ``dL/dRe z + i dL/dIm z`` (``grad * conj(f'(z))`` for a holomorphic ``f``).

    Raises
    ------
    ValueError
        A formula of the same name exists already (a formula's ``release()`` gives its name up).

    See Also
    --------
    apply : the function of complex inputs a formula computes, with its gradient.
    realify.rules.register : ``register(op, derivative=...)`` declares a function of one
        complex argument with its formula.

    Notes
    -----
    A formula is a value: a rule that computes with it is what enters the rule table. Write
    ``vjp`` with the same operations, in the same order, as eager's formula for the op (its
    ``derivatives.yaml``), so that infinities and zeros meet as they do in eager. The
    functions of one complex argument need no formula of their own: ``register(op,
    derivative=...)`` makes it.

    Examples
    --------
    The product of two complex inputs, ``z w``, whose gradients are ``grad conj(w)`` and
    ``grad conj(z)``:

    >>> import torch
    >>> import realify
    >>> from realify.rules import Formula, apply
    >>> def values(parts, constants):
    ...     a, b, c, d = parts  # z = a + ib, w = c + id
    ...     return [a * c - b * d, a * d + b * c]
    >>> def vjp(inputs, outputs, grad, constants):
    ...     z, w = inputs
    ...     return [grad * w.conj(), grad * z.conj()]
    >>> product = Formula("docs_formula_product", values, vjp)
    >>> z = realify.ComplexTensor(torch.tensor([1.0]), torch.tensor([2.0]))
    >>> w = realify.ComplexTensor(torch.tensor([3.0]), torch.tensor([4.0]))
    >>> apply(product, z, w)
    C(re=tensor([-5.]), im=tensor([10.]))
    >>> Formula("docs_formula_product", values, vjp)
    Traceback (most recent call last):
        ...
    ValueError: a derivative formula named 'docs_formula_product' exists already
    >>> product.release()
    """

    name: str
    values: Callable[[Sequence[Tensor], Sequence[float]], Sequence[Tensor]]
    vjp: Callable[..., Sequence[C]]

    def __post_init__(self) -> None:
        if _BY_NAME.setdefault(self.name, self) is not self:
            raise ValueError(f"a derivative formula named {self.name!r} exists already")

    def release(self) -> None:
        """Give up the name, for a formula that replaces this one.

        ``register(..., override=True)`` of a function of one complex argument does, for the
        formula of the rule it replaces.
        """
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
    """Compute ``formula``'s function of complex ``inputs``, with the formula's gradient.

    The inputs' parts are broadcast to one shape and passed to the custom op
    ``realify::pointwise``, whose forward is the formula's kernel (``values``) and whose
    backward its gradient (``vjp``). This is how a rule computes with a :class:`Formula`.

    Parameters
    ----------
    formula : Formula
        The kernel and its gradient.
    *inputs : C or ComplexTensor
        The complex inputs, each with real parts ``.re`` and ``.im`` (a real operand with a
        zero imaginary part).
    constants : sequence of float, default ()
        Numbers the kernel and the gradient read (an exponent, a base's logarithm), passed to
        both as floats; they get no gradient.

    Returns
    -------
    C or torch.Tensor
        The result: a complex one as its parts ``.re`` and ``.im`` (a ``C``, with complex
        arithmetic), a real one as a tensor.

    Raises
    ------
    RuntimeError
        The inputs' parts do not broadcast to one shape.

    See Also
    --------
    Formula : a kernel and its gradient.

    Examples
    --------
    ``k z w`` with the number ``k`` as a constant; ``z`` has two elements, ``w`` one, which is
    broadcast:

    >>> import torch
    >>> import realify
    >>> from realify.rules import Formula, apply
    >>> def values(parts, constants):
    ...     a, b, c, d = parts
    ...     (k,) = constants
    ...     return [k * (a * c - b * d), k * (a * d + b * c)]
    >>> def vjp(inputs, outputs, grad, constants):
    ...     (z, w), (k,) = inputs, constants
    ...     return [grad * (k * w).conj(), grad * (k * z).conj()]
    >>> scaled_product = Formula("docs_apply_scaled_product", values, vjp)
    >>> z = realify.ComplexTensor(torch.tensor([1.0, 0.5]), torch.tensor([2.0, -1.0]))
    >>> w = realify.ComplexTensor(torch.tensor([3.0]), torch.tensor([4.0]))
    >>> result = apply(scaled_product, z, w, constants=(2.0,))
    >>> result.re, result.im
    (tensor([-10.,  11.]), tensor([20., -2.]))
    >>> scaled_product.release()
    """
    parts = [p for z in inputs for p in (z.re, z.im)]
    # a 0-d CPU operand beside an accelerator's is a scalar to eager: it joins their device
    device = next((p.device for p in parts if p.device.type != "cpu"), parts[0].device)
    parts = torch.broadcast_tensors(*(on_device(p, device) if p.dim() == 0 else p for p in parts))
    out = pointwise(formula.name, list(parts), [float(c) for c in constants])
    return C(*out) if len(out) == 2 else out[0]


@dataclasses.dataclass(frozen=True)
class OneArgument:
    """A pointwise function of one complex argument, declared once: the rule of ``op``.

    Declared with ``register(op, derivative=...)`` (realify/rules/_registry.py), it holds
    everything the front ends and the tests need to know of the function.

    ``kernel(x, y)`` maps the planar parts of ``z = x + iy`` to the result's ``(re, im)``, or to
    one real tensor; ``derivative(g, z, w)`` is the gradient of ``z`` (a :class:`C`) for the
    output gradient ``g`` and the result ``w``, eager's formula; ``real_operand(x)`` is the
    rule's value for a real operand ``x`` (None: the function of ``x + 0i``);
    ``eager_by_formula`` says whether the eager ComplexTensor front end differentiates the
    function by this formula rather than by PyTorch's (realify/tensor.py).
    """

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
        """The function's name: its op's (``exp``).

        It is also the public function's (``torch.exp``) and the formula's in a graph
        (``realify::pointwise('exp', ...)``).
        """
        return self.op.overloadpacket.__name__

    def __call__(self, operand: Any) -> Any:
        """Compute the function of ``operand`` (the rule), through ``realify::pointwise``."""
        re, im = parts(operand)
        if im is None and self.real_operand is not None:
            return self.real_operand(re)
        out = self.of(C(re, torch.zeros_like(re) if im is None else im))
        return ComplexTensor(*out) if isinstance(out, C) else out

    def of(self, z: C) -> C | Tensor:
        """Compute the function of a complex value, with this derivative (for formulas that use it)."""
        return apply(self.formula, z)


def _outputs(result: Any) -> list[Tensor]:
    """Return a kernel's result as the custom op's flat outputs: (re, im), or the one real tensor."""
    return [result] if isinstance(result, Tensor) else list(result)


def decompositions() -> dict:
    """Return the decomposition of ``realify::pointwise`` into its kernel's real ops.

    The rules that carry a derivative formula run as the custom op ``realify::pointwise``,
    whose backward is the formula. A tracer below autograd, which needs no backward, passes
    this table to see the kernel's real ops instead of the op: AOTAutograd with Inductor,
    ``ExportedProgram.run_decompositions`` before ``torch.onnx``, or ``make_fx`` of a graph
    from :func:`realify.decompose` for a consumer that knows only aten ops.

    Returns
    -------
    dict of OpOverload to callable
        A decomposition table: ``torch.ops.realify.pointwise.default`` and the function that
        computes it with the kernel of the formula each call names.

    Raises
    ------
    None
        It only builds the table.

    Examples
    --------
    ``exp`` of a complex tensor is a ``realify::pointwise`` call in a decomposed graph, and
    its kernel's real ops after the decomposition:

    >>> import torch
    >>> import realify
    >>> from torch.fx.experimental.proxy_tensor import make_fx
    >>> list(realify.pointwise_decompositions())
    [<OpOverload(op='realify.pointwise', overload='default')>]
    >>> z = torch.tensor([1 + 2j, 3 - 1j])
    >>> gm = realify.decompose(torch.exp, [z])
    >>> any(node.target is torch.ops.realify.pointwise.default for node in gm.graph.nodes)
    True
    >>> real = make_fx(gm, decomposition_table=realify.pointwise_decompositions())(z)
    >>> any(node.target is torch.ops.realify.pointwise.default for node in real.graph.nodes)
    False
    >>> torch.equal(real(z)[0], gm(z)[0])
    True
    """

    def values(name, parts, constants):
        return list(_formula(name).values(parts, constants))

    return {torch.ops.realify.pointwise.default: values}
