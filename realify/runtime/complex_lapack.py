"""A complex ATen linear-algebra op as a real-interface op on (re, im) pairs.

``pairs_op(aten.linalg_qr.default)`` is ``realify::linalg_qr_pairs``: ATen's schema with a
leading ``bool[] complex_args`` that says which arguments are complex tensors given as real
``(..., 2)`` pairs (the arguments past its end are not). Its kernel turns those into complex
tensors (no copy), runs the ATen op (the device's complex LAPACK: geqrf/ungqr, heevd, gesdd,
geev, sytrf, ...) and returns every complex result as pairs; real results (singular values,
Hermitian eigenvalues) and integer ones (pivots, info) come back as they are. So a compiled
program runs eager's own kernel on eager's own numbers, bit for bit, including the phases of
eigenvectors and singular vectors, and the graph around it holds no complex dtype.

The fake implementation is the same kernel on fake tensors (ATen's meta functions give the
shapes). The derivative is eager's: a backward op recomputes the ATen op under torch.func.vjp,
for the outputs whose gradients are defined (as eager autograd does, so ``linalg.svd`` with
``full_matrices=True`` differentiates where only S is read, and raises where U is). Gradients
of complex arguments follow PyTorch's convention, ``dL/dRe + i dL/dIm`` as the pair
``(dL/dRe, dL/dIm)``. An op eager cannot differentiate (geqrf, the LDL family) raises eager's
error at backward time, as eager does.

realify/runtime/lapack.py holds the LU family's three ops, declared by hand: realify.onnx
writes those in real arithmetic, and their schemas are what its translations match.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import torch

from .dtypes import complex_of
from .eager_dispatch import eager_dispatch

__all__ = ["complex_from_pairs", "pairs_from_complex", "pairs_op"]


def complex_from_pairs(pairs: torch.Tensor) -> torch.Tensor:
    """The complex tensor of real ``(..., 2)`` pairs: a view where the dtype allows (LAPACK reads
    the pairs, no copy)."""
    if pairs.dtype in (torch.float32, torch.float64):
        return torch.view_as_complex(pairs.contiguous())
    return complex_of(pairs[..., 0], pairs[..., 1])


def pairs_from_complex(z: torch.Tensor) -> torch.Tensor:
    """z's (re, im) pairs, contiguous (a custom op's result owns its memory)."""
    return torch.view_as_real(z.resolve_conj()).contiguous()


def pairs_result(x: Any) -> Any:
    # complex results as pairs; a custom op's results may not alias its arguments, and a view
    # may be one of them (eager's cumprod backward of at most one entry returns the gradient
    # it was given, itself a view of the pairs the op took)
    if isinstance(x, torch.Tensor):
        if x.is_complex() and not x._is_view():
            return pairs_from_complex(x)
        return (pairs_from_complex(x) if x.is_complex() else x).clone(memory_format=torch.contiguous_format)
    return x


class _Signature:
    """ATen's arguments of one op, split as it takes them: positional, then keyword-only."""

    def __init__(self, op: torch._ops.OpOverload):
        arguments = op._schema.arguments
        self.names = [a.name for a in arguments]
        self.positional = sum(not a.kwarg_only for a in arguments)
        self.defaults = [a.default_value if a.has_default_value() else None for a in arguments]

    def bind(self, values: Sequence[Any]) -> tuple[list[Any], dict[str, Any]]:
        return list(values[:self.positional]), dict(zip(self.names[self.positional:], values[self.positional:]))


def _schema(op: torch._ops.OpOverload, leading: str, returns: str | None = None) -> str:
    # every argument positional: a custom op takes no keyword-only tensors (pinv's tolerances)
    text = str(op._schema)
    arguments, aten_returns = text[text.index("(") + 1:].split(") -> ", 1)
    arguments = arguments.replace("*, ", "").replace(", *", "")
    return f"({leading}{', ' if arguments else ''}{arguments}) -> {returns or aten_returns}"


def _is_pairs(complex_args: Sequence[bool], i: int) -> bool:
    # complex_args may stop early: the arguments after it are not pairs
    return i < len(complex_args) and complex_args[i]


def _as_complex(values: Sequence[Any], complex_args: Sequence[bool]) -> list[Any]:
    return [complex_from_pairs(v) if _is_pairs(complex_args, i) and v is not None else v for i, v in enumerate(values)]


def _call(op, signature: _Signature, values: Sequence[Any]) -> Any:
    args, kwargs = signature.bind(values)
    return op(*args, **kwargs)


def _outputs(result: Any) -> tuple[Any, ...]:
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


# Spectral ops whose values' derivative reads the vectors: eager computes them whenever a
# gradient may be needed; the backward op recomputes with them where the forward did without
_VECTORS_FLAG = {"_linalg_eigh": "compute_v", "_linalg_svd": "compute_uv"}


@functools.cache
def pairs_op(op: torch._ops.OpOverload):
    """The real-interface op on pairs that runs the complex ATen op ``op`` (module docstring)."""
    signature = _Signature(op)
    base = op._schema.name.split("::")[1] + ("" if op._overloadname == "default" else f"_{op._overloadname}")
    single = len(op._schema.returns) == 1
    vectors_flag = _VECTORS_FLAG.get(op._schema.name.split("::")[1])

    def kernel(complex_args, *values):
        with eager_dispatch():
            result = _call(op, signature, _as_complex(values, complex_args))
        return pairs_result(result) if single else tuple(pairs_result(x) for x in result)

    forward = torch.library.custom_op(f"realify::{base}_pairs", mutates_args=(),
                                      schema=_schema(op, "bool[] complex_args"))(_positional(kernel, signature))
    forward.register_fake(_positional(kernel, signature))

    def backward_kernel(complex_args, wanted, grads, *values):
        inputs = [i for i, w in enumerate(wanted) if w]

        def differentiable(*chosen):
            full = list(_as_complex(values, complex_args))
            for i, z in zip(inputs, chosen):
                full[i] = z
            if vectors_flag is not None:
                full[signature.names.index(vectors_flag)] = True
            outputs = _outputs(_call(op, signature, full))
            return tuple(outputs[k] for k, g in enumerate(grads) if g is not None)

        with eager_dispatch():
            primals = [complex_from_pairs(values[i]) if _is_pairs(complex_args, i) else values[i] for i in inputs]
            outputs, pullback = torch.func.vjp(differentiable, *primals)
            defined = [g for g in grads if g is not None]
            cotangents = tuple(complex_from_pairs(g) if y.is_complex() else g for y, g in zip(outputs, defined))
            return [pairs_result(g) for g in pullback(cotangents)]

    def backward_fake(complex_args, wanted, grads, *values):
        return [values[i].new_empty(values[i].shape) for i, w in enumerate(wanted) if w]

    backward = torch.library.custom_op(
        f"realify::{base}_pairs_backward", mutates_args=(),
        schema=_schema(op, "bool[] complex_args, bool[] wanted, Tensor?[] grads", "Tensor[]"),
    )(_positional(backward_kernel, signature, leading=3))
    backward.register_fake(_positional(backward_fake, signature, leading=3))

    def setup_context(ctx, inputs, output):
        complex_args, *values = inputs
        ctx.set_materialize_grads(False)
        ctx.complex_args = complex_args
        ctx.tensors = [i for i, v in enumerate(values) if isinstance(v, torch.Tensor)]
        ctx.values = [None if i in ctx.tensors else v for i, v in enumerate(values)]
        ctx.save_for_backward(*[values[i] for i in ctx.tensors])

    def backward_rule(ctx, *grads):
        values = list(ctx.values)
        for i, t in zip(ctx.tensors, ctx.saved_tensors):
            values[i] = t
        # ATen's keyword-only tensors (pinv's tolerances) have no derivative in eager
        wanted = [bool(n) and i < signature.positional and isinstance(v, torch.Tensor)
                  and (v.is_floating_point() or v.is_complex())
                  for i, (n, v) in enumerate(zip(ctx.needs_input_grad[1:], values))]
        if not any(wanted) or all(g is None for g in grads):
            return None, *[None] * len(values)
        computed = iter(backward(ctx.complex_args, wanted, list(grads), *values))
        return None, *[next(computed) if w else None for w in wanted]

    forward.register_autograd(backward_rule, setup_context=setup_context)
    backward.register_autograd(functools.partial(_no_second_derivative, op),
                               setup_context=lambda ctx, inputs, output: None)
    return forward


def _positional(fn, signature: _Signature, leading: int = 1):
    """``fn(*leading, *values)``, called as the dispatcher calls a kernel: arguments left at their
    defaults may be left out."""
    def called(*args, **kwargs):
        given = list(args[leading:])
        values = [given[i] if i < len(given) else kwargs.get(name, default)
                  for i, (name, default) in enumerate(zip(signature.names, signature.defaults))]
        return fn(*args[:leading], *values)

    return called


def _no_second_derivative(op, ctx, *grads):
    raise NotImplementedError(
        f"realify computes the first derivative of {op._schema.name} only (eager's formula, "
        "realify/runtime/complex_lapack.py); a second derivative through it is not supported: "
        "compute it in eager PyTorch")
