"""ComplexTensor: a complex tensor stored as two real tensors (planar layout).

``ComplexTensor(re, im)`` behaves like a complex tensor of dtype complex64/complex128/
complex32 (for float32/float64/float16 parts). Every aten op called on it is answered by the
rule table (:mod:`realify.rules`) as real ops on ``re`` and ``im``: run directly, that is the
eager front end (:mod:`realify.tensor`); traced, it is what :func:`realify.decompose` records.

This module sits below both: the rule table installs itself as the answer to aten ops
(:func:`answer_aten_ops_with`), and the eager front end adds the torch-function hooks it needs
(:func:`add_torch_function_hook`), each when it is imported; ``import realify`` imports both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.fx.experimental.symbolic_shapes import guard_or_false, guard_or_true, statically_known_true
from torch.utils._pytree import tree_map

from .dtypes import REAL_TO_COMPLEX, complex_of, pairs_of

AtenHandler = Callable[[Any, tuple, dict], Any]
# a torch-function hook: (func, args, kwargs, call) -> result, or NotImplemented to pass the
# call on (``call()`` runs it as any subclass with only __torch_dispatch__ would)
FunctionHook = Callable[[Any, tuple, dict, Callable[[], Any]], Any]
_aten_handler: list[AtenHandler] = []
_function_hooks: list[FunctionHook] = []


def answer_aten_ops_with(handler: AtenHandler) -> None:
    """Every aten op on a ComplexTensor is ``handler(func, args, kwargs)`` (the rule table's)."""
    _aten_handler[:] = [handler]


def add_torch_function_hook(hook: FunctionHook) -> None:
    """Ask ``hook`` about every torch function called on a ComplexTensor.

    Hooks are asked in the order they were added; adding one again changes nothing.
    """
    if hook not in _function_hooks:
        _function_hooks.append(hook)


def _one_shape(a: torch.Size, b: torch.Size) -> bool:
    """Tell whether two shapes are one.

    Data-dependent sizes (a part sliced at points read from a tensor, each part's own unbacked
    size) cannot be compared in a trace: they are taken as equal and recorded so, one size from
    here on, checked at run time.
    """
    if len(a) != len(b):
        return False
    if not any(isinstance(n, torch.SymInt) for n in (*a, *b)):
        return a == b  # every eager ComplexTensor: plain sizes, one comparison
    for x, y in zip(a, b):
        if not guard_or_true(x == y):
            return False
        if not statically_known_true(x == y):
            torch._check(x == y)
    return True


def _not_tensors_message(re: Any, im: Any) -> str:
    return (f"ComplexTensor(re, im) takes the real and imaginary parts as two real tensors, got "
            f"re: {type(re).__name__}, im: {type(im).__name__}; make them tensors first "
            f"(torch.as_tensor(x, dtype=torch.float32))")


def _parts_dtype_message(re: torch.dtype, im: torch.dtype) -> str:
    """Say what is wrong with two parts' dtypes, and the fix for that case.

    Casting is right for integer parts, and would drop the imaginary part of complex ones.
    """
    got = f"got re={re}, im={im}"
    if re.is_complex or im.is_complex:
        return (f"ComplexTensor(re, im) takes the real and imaginary parts as real tensors, {got}: "
                f"for a complex tensor z, pass ComplexTensor(z.real, z.imag), or build it with "
                f"ComplexTensor.from_complex(z) (a view of z's pairs; from_pairs for a real (..., 2) "
                f"tensor). Casting z to a real dtype would drop its imaginary part.")
    parts = ", ".join(str(d).removeprefix("torch.") for d in REAL_TO_COMPLEX)
    if re in REAL_TO_COMPLEX and im in REAL_TO_COMPLEX:
        return (f"ComplexTensor parts must have one dtype, {got}: cast one to the other's, "
                f"for example im.to(re.dtype)")
    return (f"ComplexTensor parts must both be one of {parts} (the parts of a complex dtype), {got}: "
            f"cast them, for example re.to(torch.float32) and im.to(torch.float32)")


class ComplexTensor(torch.Tensor):
    """A complex tensor stored as two real tensors, its real and imaginary parts (planar layout).

    It behaves as a complex tensor of dtype complex32, complex64 or complex128 (for float16,
    float32 or float64 parts): each aten op called on it runs through realify's rule table as
    real ops on ``re`` and ``im``, and its complex results are ComplexTensors too. This is the
    eager front end, which needs no compiler; it is also what :func:`realify.decompose` traces.

    Parameters
    ----------
    re : torch.Tensor
        The real parts: float16, float32 or float64.
    im : torch.Tensor
        The imaginary parts, of the dtype, shape and device of ``re``.

    Attributes
    ----------
    re : torch.Tensor
        The real parts (``re`` itself, detached where it requires grad).
    im : torch.Tensor
        The imaginary parts.

    Raises
    ------
    TypeError
        ``re`` or ``im`` is not a tensor, or their dtypes are not one real floating dtype (for
        a complex tensor ``z``, use :meth:`from_complex` rather than casting it).
    ValueError
        The parts differ in shape or device.

    See Also
    --------
    from_complex : the parts of an ordinary complex tensor.
    from_pairs : the parts of a real ``(..., 2)`` tensor of (re, im) pairs.

    Notes
    -----
    Where ``re`` or ``im`` requires grad (and grad mode is on), the ComplexTensor does too: the
    gradient reaching it flows back to the parts as its real and imaginary parts.

    Examples
    --------
    >>> import torch
    >>> import realify
    >>> z = realify.ComplexTensor(torch.tensor([1.0, 3.0]), torch.tensor([2.0, -1.0]))
    >>> z.dtype, z.shape
    (torch.complex64, torch.Size([2]))
    >>> z * z
    ComplexTensor(re=tensor([-3.,  8.]), im=tensor([ 4., -6.]))
    >>> torch.allclose(torch.exp(z).to_complex(), torch.exp(torch.tensor([1 + 2j, 3 - 1j])))
    True
    """

    re: torch.Tensor
    im: torch.Tensor

    @staticmethod
    def __new__(cls, re: torch.Tensor, im: torch.Tensor) -> ComplexTensor:
        """Check the parts and wrap them as one complex tensor (see the class docstring)."""
        if not isinstance(re, torch.Tensor) or not isinstance(im, torch.Tensor):
            raise TypeError(_not_tensors_message(re, im))
        if re.dtype not in REAL_TO_COMPLEX or im.dtype != re.dtype:
            raise TypeError(_parts_dtype_message(re.dtype, im.dtype))
        if not _one_shape(re.shape, im.shape):
            raise ValueError(f"ComplexTensor parts must have one shape, got {tuple(re.shape)} and {tuple(im.shape)}")
        if re.device != im.device:
            raise ValueError(f"ComplexTensor parts must share a device, got {re.device} and {im.device}")
        needs_grad = torch.is_grad_enabled() and (re.requires_grad or im.requires_grad)
        if needs_grad:
            return _Assemble.apply(re, im)
        return cls._wrap(re, im)

    @classmethod
    def _wrap(cls, re: torch.Tensor, im: torch.Tensor) -> ComplexTensor:
        strides = _outer_strides(re, im)
        out = torch.Tensor._make_wrapper_subclass(
            cls,
            re.shape,
            strides=strides,
            dtype=REAL_TO_COMPLEX[re.dtype],
            device=re.device,
            requires_grad=False,
        )
        out.re = re.detach() if re.requires_grad else re
        out.im = im.detach() if im.requires_grad else im
        return out

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    @staticmethod
    def from_pairs(pairs: torch.Tensor) -> ComplexTensor:
        """Return the complex tensor whose (re, im) pairs are the last dimension of a real tensor.

        Its parts are views of ``pairs`` (no copy), so writes to either show in the other.

        Parameters
        ----------
        pairs : torch.Tensor
            A real ``(..., 2)`` tensor (float16, float32 or float64): ``pairs[..., 0]`` the
            real parts, ``pairs[..., 1]`` the imaginary parts, as ``torch.view_as_real`` lays
            them out.

        Returns
        -------
        ComplexTensor
            Of shape ``pairs.shape[:-1]``, and the complex dtype whose parts have ``pairs``'s dtype.

        Raises
        ------
        TypeError
            ``pairs`` is not of a real floating dtype.
        ValueError
            The last dimension of ``pairs`` is not of size 2.

        Examples
        --------
        >>> import torch
        >>> import realify
        >>> pairs = torch.tensor([[1.0, 2.0], [3.0, -1.0]])
        >>> z = realify.ComplexTensor.from_pairs(pairs)
        >>> z
        ComplexTensor(re=tensor([1., 3.]), im=tensor([ 2., -1.]))
        >>> torch.equal(z.to_complex(), torch.view_as_complex(pairs))
        True
        """
        if pairs.dim() == 0 or pairs.shape[-1] != 2:
            raise ValueError(f"ComplexTensor.from_pairs needs a real (..., 2) tensor of (re, im) pairs, got shape "
                             f"{tuple(pairs.shape)}; for separate parts call ComplexTensor(re, im)")
        return ComplexTensor(pairs[..., 0], pairs[..., 1])

    # ---- conversion -------------------------------------------------------------------
    @staticmethod
    def from_complex(t: torch.Tensor) -> ComplexTensor:
        """Split an ordinary complex tensor into its real and imaginary parts.

        The parts are views of ``t``'s storage (no copy; a lazily conjugated or negated ``t`` is
        resolved first, and complex32 goes through a complex64 copy), and the split is
        differentiable: a gradient reaching the ComplexTensor flows back to ``t``.

        Parameters
        ----------
        t : torch.Tensor
            A complex tensor (complex32, complex64 or complex128); a ComplexTensor is returned
            as it is.

        Returns
        -------
        ComplexTensor
            The values of ``t``, its parts of the matching real dtype.

        Raises
        ------
        TypeError
            ``t`` is not complex (build a real tensor's ComplexTensor with
            ``ComplexTensor(re, torch.zeros_like(re))``).

        Examples
        --------
        >>> import torch
        >>> import realify
        >>> z = realify.ComplexTensor.from_complex(torch.tensor([1 + 2j, 3 - 1j]))
        >>> z.re, z.im
        (tensor([1., 3.]), tensor([ 2., -1.]))
        >>> realify.ComplexTensor.from_complex(z) is z
        True
        """
        if isinstance(t, ComplexTensor):
            return t
        if not t.dtype.is_complex:
            raise TypeError(f"from_complex needs a complex tensor, got {t.dtype}; "
                            "use ComplexTensor(re, zeros_like(re))")
        parts = pairs_of(t)
        return ComplexTensor(parts[..., 0], parts[..., 1])

    def to_complex(self) -> torch.Tensor:
        """Return an ordinary (interleaved) complex tensor with the same values.

        The conversion is differentiable: where the ComplexTensor requires grad, the gradient of
        the result flows back to it (and on to the parts it was built from).

        Returns
        -------
        torch.Tensor
            A plain complex tensor of this tensor's shape and dtype.

        Raises
        ------
        None
            The parts are always valid (the constructor checked them).

        Examples
        --------
        >>> import torch
        >>> import realify
        >>> z = torch.tensor([1 + 2j, 3 - 1j], requires_grad=True)
        >>> w = realify.ComplexTensor.from_complex(z)
        >>> out = (w * w.conj()).to_complex()
        >>> type(out).__name__, out.dtype
        ('Tensor', torch.complex64)
        >>> out
        tensor([ 5.+0.j, 10.+0.j], grad_fn=<...>)
        >>> out.real.sum().backward()
        >>> z.grad
        tensor([2.+4.j, 6.-2.j])
        """
        if self.requires_grad:
            return _Disassemble.apply(self)
        return complex_of(self.re, self.im)

    # ---- tracing support ------------------------------------------------------------
    def __tensor_flatten__(self):
        return ["re", "im"], None

    @staticmethod
    def __tensor_unflatten__(inner: dict, ctx: Any, outer_size: Any, outer_stride: Any) -> ComplexTensor:
        return ComplexTensor(inner["re"], inner["im"])

    def __repr__(self, *, tensor_contents: Any = None) -> str:
        return f"ComplexTensor(re={self.re!r}, im={self.im!r})"

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        # the hooks answer the calls whose meaning is lost below the dispatcher; every other
        # call runs as for any subclass with only __torch_dispatch__ (results are not converted)
        kwargs = kwargs or {}

        def call():
            return torch._C._disabled_torch_function_impl(func, types, args, kwargs)

        for hook in _function_hooks:
            result = hook(func, args, kwargs, call)
            if result is not NotImplemented:
                return result
        return call()

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        if not _aten_handler:
            raise RuntimeError("ComplexTensor needs the rule table: import realify")
        return _aten_handler[0](func, args, kwargs or {})


def _outer_strides(re: torch.Tensor, im: torch.Tensor) -> tuple[int, ...] | None:
    """Return the strides of the complex tensor the parts describe.

    They are halved when the parts are the two halves of one interleaved storage (as
    from_complex makes them), the parts' own otherwise, and contiguous (None) when the parts
    disagree, or may (strides read from data).
    """
    if not all(guard_or_false(a == b) for a, b in zip(re.stride(), im.stride())):
        return None
    if _interleaved(re, im) and all(s % 2 == 0 for s in re.stride()):
        return tuple(s // 2 for s in re.stride())
    return re.stride()


def outer_storage_offset(z: ComplexTensor) -> int:
    """Return the storage offset of the complex tensor ``z``'s parts describe, in complex elements.

    The wrapper itself reports none. It is half the real part's where the parts are the two
    halves of one interleaved storage, the real part's own otherwise.
    """
    offset = z.re.storage_offset()
    return offset // 2 if _interleaved(z.re, z.im) else offset


def _interleaved(re: torch.Tensor, im: torch.Tensor) -> bool:
    if isinstance(re, torch._subclasses.FakeTensor) or re.device.type == "meta":
        return False  # traced parts: their strides are what the trace made them
    try:
        return (re.untyped_storage().data_ptr() == im.untyped_storage().data_ptr()
                and im.storage_offset() == re.storage_offset() + 1)
    except (RuntimeError, NotImplementedError):  # fake/meta tensors without storage
        return False


class _Assemble(torch.autograd.Function):
    """(re, im) -> ComplexTensor, passing the gradient's real/imag parts back to re/im."""

    @staticmethod
    def forward(ctx, re, im):
        return ComplexTensor._wrap(re.detach(), im.detach())

    @staticmethod
    def backward(ctx, grad):
        grad = as_complex_tensor(grad)
        return grad.re, grad.im


class _Disassemble(torch.autograd.Function):
    """ComplexTensor -> ordinary complex tensor, gradient flowing back as a ComplexTensor."""

    @staticmethod
    def forward(ctx, z):
        return complex_of(z.re, z.im)

    @staticmethod
    def backward(ctx, grad):
        return ComplexTensor.from_complex(grad)


def as_complex_tensor(x: Any) -> Any:
    """ComplexTensor for any complex tensor; anything else is returned unchanged."""
    if isinstance(x, torch.Tensor) and x.dtype.is_complex and not isinstance(x, ComplexTensor):
        return ComplexTensor.from_complex(x)
    return x


def wrap_complex(tree: Any) -> Any:
    """Replace every ordinary complex tensor in a pytree by a ComplexTensor."""
    return tree_map(as_complex_tensor, tree)


def unwrap_complex(tree: Any) -> Any:
    """Replace every ComplexTensor in a pytree by an ordinary complex tensor."""
    return tree_map(lambda x: x.to_complex() if isinstance(x, ComplexTensor) else x, tree)
