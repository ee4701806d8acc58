"""Eager's contract on an op's operands, checked before the op's rule replaces it.

A rule computes on (re, im) parts, so it can compute a value for operands eager refuses: a
float32 matrix times a complex64 one (eager's ``mm`` wants one dtype; the parts are both
float32), a complex64 ``index_put`` into a float32 tensor. The default backend raises there, and
so must realify. Those checks live in eager's CPU kernels, not in their meta kernels, so fake
tensors (what every trace holds) pass them: ``aten.mm`` of fake float32 and complex64 tensors
returns a float32 fake.

So eager's kernel is asked. Where an op's floating and complex tensor operands do not all have
one dtype (the only calls a kernel-side dtype check can refuse that the meta kernel lets
through), the op runs on *probes*: zero-filled CPU tensors of each operand's dtype and rank,
every size over 3 made 3 (symbolic ones too). Where eager raises on the probes and runs when
the probes all take the promoted dtype, the refusal is the
dtypes', and realify raises eager's exception. A probe that fails for another reason (a view
whose sizes no longer fit the probe's) fails both ways and refuses nothing. Results are
cached by op and operand dtypes, ranks and other arguments.
"""

from __future__ import annotations

import contextlib
import operator
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.fx.traceback as fx_traceback
from torch._functorch.pyfunctorch import temporarily_clear_interpreter_stack
from torch._ops import OpOverload
from torch._prims_common import is_contiguous_or_false
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch.fx.experimental.proxy_tensor import disable_proxy_modes_tracing
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils._pytree import tree_flatten, tree_unflatten

_SYMBOLIC = (torch.SymInt, torch.SymFloat, torch.SymBool)
_CACHE: dict[Any, BaseException | None] = {}
_CACHE_LIMIT = 4096


def refusal(func: OpOverload, args: tuple, kwargs: dict,
            where: Callable[[], str | None] | None = None, *, ruled: bool = False) -> BaseException | None:
    """The exception eager raises for ``func(*args, **kwargs)`` where it refuses the operands'
    dtypes (of eager's own type and message, with ``where()``, the user's line, appended; its
    ``eager_refusal`` attribute names the op), or None where it does not.

    ``ruled``: a rule of realify's own decides the op on complex operands. Its kernel's refusal
    of the complex dtype is then not asked: the rule says what the op is on complex values
    (average pooling and interpolation per part, where eager has no complex kernel; max
    pooling's named error). Without one, the op's complex value would come from a
    decomposition eager never runs on complex values (``mse_loss``'s ``(x - y)^2``).
    """
    if func.namespace != "aten":
        return None
    leaves, spec = tree_flatten((args, kwargs))
    by_realify = _written_by_autocast()
    if func in _NO_COMPLEX_CPU_KERNEL and _complex_on_cpu(leaves) and not by_realify:
        return eager_error(func, args, kwargs, where)
    dtypes = {x.dtype for x in leaves if isinstance(x, torch.Tensor)}
    if _complex_on_cpu(leaves) and not ruled and not by_realify:
        error = _cached((func, "kernel", tuple(_signature(x) for x in leaves)),
                        lambda: _kernel_refuses_complex(func, leaves, spec))
        if error is not None:
            return _as_raised(func, error, where, dtypes or {x for x in leaves if isinstance(x, torch.dtype)})
    # operands of two or more dtypes, or complex32 ones (which few CPU kernels take)
    if len(dtypes) < 2 and torch.complex32 not in dtypes:
        return None
    error = _cached((func, tuple(_signature(x) for x in leaves)), lambda: _probe(func, leaves, spec, dtypes))
    return _as_raised(func, error, where, dtypes) if error is not None else None


def _cached(key: Any, probe: Callable[[], BaseException | None]) -> BaseException | None:
    # a probe's outcome, once per op and operand signature
    try:
        return _CACHE[key]
    except KeyError:
        error = _CACHE[key] = probe()
        if len(_CACHE) > _CACHE_LIMIT:
            _CACHE.clear()
        return error
    except TypeError:  # an argument that does not hash
        return probe()


# ops whose eager CPU kernels take no complex operand, though their meta kernels do: a complex
# convolution exists in eager only through the composite conv1d/2d/3d (three real ones), so a
# program's own call of aten.convolution on complex tensors is refused as eager refuses it
# (realify's rule computes it for the convolutions complex_autocast writes, and for rules)
_NO_COMPLEX_CPU_KERNEL = frozenset({torch.ops.aten.convolution.default, torch.ops.aten._convolution.default})


def _complex_on_cpu(leaves: list) -> bool:
    # a complex operand, or a factory's complex dtype, with every tensor (and device) on the CPU
    tensors = [x for x in leaves if isinstance(x, torch.Tensor)]
    made_complex = not tensors and any(isinstance(x, torch.dtype) and x.is_complex for x in leaves)
    return ((made_complex or any(x.is_complex() for x in tensors))
            and all(x.device.type == "cpu" for x in tensors)
            and all(x.type == "cpu" for x in leaves if isinstance(x, torch.device)))


# the message of ATen's dtype dispatch where a kernel has no instance for the dtype: eager's
# refusal of the dtype itself, whatever the values
_NO_KERNEL_FOR = ("not implemented for 'ComplexFloat'", "not implemented for 'ComplexDouble'",
                  "not implemented for 'ComplexHalf'")


def _kernel_refuses_complex(func: OpOverload, leaves: list, spec) -> BaseException | None:
    """Eager's error where its kernel for ``func`` takes no complex operand (``mse_loss``,
    ``maximum``, ``sort``, ``arange`` of a complex dtype), though the meta kernel, and so every
    trace, takes one.

    The call runs on probes of the operands' own dtypes (a factory's numbers made 1, so that it
    makes one element at most). ATen's dtype-dispatch error is the refusal; so is any error at
    both fills where the same probes at the real counterparts of the complex dtypes run (a
    check of the kernel's own, ``maximum``'s TypeError): the complex dtype is what eager
    refuses, not the probes' sizes or values.
    """
    if not any(isinstance(x, torch.Tensor) for x in leaves):
        leaves = [1 if isinstance(x, (int, float, *_SYMBOLIC)) and not isinstance(x, bool) else x for x in leaves]
    with _probing():
        # one probe for the calls eager runs (almost all): the second fill only after a failure
        error = _run_probes(func, leaves, spec, lambda i, x: x.dtype, _FILLS[0])
        if error is None:
            return None
        if isinstance(error, NotImplementedError) and any(m in str(error) for m in _NO_KERNEL_FOR):
            return error
        if _run_probes(func, leaves, spec, lambda i, x: x.dtype, _FILLS[1]) is None:
            return None
        real = [x.to_real() if isinstance(x, torch.dtype) and x.is_complex else x for x in leaves]
        if any(_run_probes(func, real, spec, lambda i, x: x.dtype.to_real(), fill) is None for fill in _FILLS):
            return error
    return None


# the node annotation (``meta["custom"]``) realify/passes/autocast.py puts on a complex product
# that runs under autocast: its lower precision
AUTOCAST_TAG = "realify_autocast"


def _written_by_autocast() -> bool:
    """Whether the call being planarized is one realify wrote for a program's conv*d under
    ``complex_autocast`` (realify/passes/autocast.py tags its node), not the program's own."""
    meta = fx_traceback.get_current_meta() if fx_traceback.has_preserved_node_meta() else None
    return AUTOCAST_TAG in (meta or {}).get("custom", {})


# x += z as dynamo records it
_AUGMENTED_ASSIGNMENTS = frozenset({operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ipow,
                                    operator.imatmul})


def writes_in_place(func: Callable) -> bool:
    """Whether ``func`` writes its first argument: ``add_``, ``__iadd__``, ``x += z``."""
    name = getattr(func, "_opname", None) or getattr(func, "__name__", "")  # aten.add_.Tensor: "add_"
    return ((name.endswith("_") and not name.startswith("_")) or (name.startswith("__i") and name.endswith("__"))
            or func in _AUGMENTED_ASSIGNMENTS)


def in_place_refusal(func: Callable, args: tuple, kwargs: dict,
                     where: Callable[[], str | None] | None = None) -> BaseException | None:
    """The exception eager raises for an in-place call of the program (``x.add_(z)``, ``x += z``)
    whose complex result would be written into the real tensor ``x``, or None.

    Functionalization writes such a call as the out-of-place op and a copy, both of which eager
    takes (the copy drops the imaginary part), so the refusal is checked on the call as written:
    eager raises on probes of the operands' dtypes and runs where ``x``'s probe is complex."""
    target = args[0] if args else None
    if not (writes_in_place(func) and isinstance(target, torch.Tensor) and not target.is_complex()):
        return None
    leaves, spec = tree_flatten((args, kwargs))
    if not any(isinstance(x, complex) or (isinstance(x, torch.Tensor) and x.is_complex()) for x in leaves[1:]):
        return None
    dtypes = {x.dtype for x in leaves if isinstance(x, torch.Tensor)}
    with _probing():
        error = _run_probes(func, leaves, spec, lambda i, x: x.dtype, 1)
        if error is None:
            return None
        complex_target = _promoted(dtypes | {torch.complex64})
        if _run_probes(func, leaves, spec, lambda i, x: complex_target if i == 0 else x.dtype, 1) is not None:
            return None  # refused with a complex target too: not the write into a real tensor
    return _as_raised(func, error, where, dtypes)


def eager_error(func: OpOverload, args: tuple, kwargs: dict,
                where: Callable[[], str | None] | None = None) -> BaseException | None:
    """Where a rule failed on a call: the exception eager raises for the same call on probes of
    either fill (eager's type and message for a contract the rule checks its own way: an
    operand of the wrong rank, a complex value that fits no integer), or None where eager's
    probes run."""
    if func.namespace != "aten":
        return None
    leaves, spec = tree_flatten((args, kwargs))
    with _probing():
        errors = [e for fill in _FILLS if (e := _run_probes(func, leaves, spec, lambda i, x: x.dtype, fill))]
    if not errors:
        return None
    return _as_raised(func, errors[0], where, {x.dtype for x in leaves if isinstance(x, torch.Tensor)})


def _as_raised(func: Callable, error: BaseException, where: Callable[[], str | None] | None,
               dtypes: set) -> BaseException:
    """``error``'s type and message, the user's line and the call's dtypes appended; its
    ``eager_refusal`` attribute names the op."""
    line = where() if where is not None else None
    message = ((str(error.args[0]) if error.args else str(error)) + (f"\n  at: {line}" if line else "")
               + f"\n  (eager PyTorch raises this for {func} on operands of dtypes "
               + ", ".join(sorted(str(d).removeprefix("torch.") for d in dtypes)) + "; so does realify)")
    try:
        raised = type(error)(message)
    except Exception:  # an exception type with a constructor of its own
        raised = RuntimeError(message)
    raised.eager_refusal = str(func)  # type: ignore[attr-defined]
    return raised


def _signature(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return (x.dtype, tuple(min(s, 3) if isinstance(s, int) else 3 for s in x.shape), _contiguous(x))
    if isinstance(x, _SYMBOLIC):
        return type(x)
    return x


def _probe(func: OpOverload, leaves: list, spec, dtypes: set) -> BaseException | None:
    promoted = _promoted(dtypes)
    integral = [i for i, x in enumerate(leaves) if _integral(x)]
    with _probing():
        # filled with 0, then 1 (a LAPACK pivot is at least 1; 1 + 1i fits no integer)
        errors = [_run_probes(func, leaves, spec, lambda i, x: x.dtype, fill) for fill in _FILLS]
        if any(e is None for e in errors):
            return None
        # one dtype for the floating and complex operands and for a subset of the integer and
        # boolean ones (the others may be indices or masks, which keep their dtype): the
        # promoted one (complex64 for complex32), or where ATen has no kernel of that complex
        # dtype for this overload (complex convolutions run as real ones above it), its real
        # counterpart
        unified = [torch.complex64 if promoted is torch.complex32 else promoted]
        unified += [unified[0].to_real()] if promoted.is_complex else []
        complex_errors: set[str] = set()
        for dtype in unified:
            if not dtype.is_complex and str(errors[0]) in complex_errors:
                # eager refuses the op at the complex dtype itself, mixed or not (complex batch
                # norm): not a refusal of the mix, and the rule says what it does
                return None
            for chosen in _subsets(integral[:_MAX_INTEGRAL]):
                def dtype_of(i, x, dtype=dtype, chosen=chosen):
                    return dtype if i in chosen or not _integral(x) else x.dtype
                outcomes = [_run_probes(func, leaves, spec, dtype_of, fill) for fill in _FILLS]
                if any(e is None for e in outcomes):
                    return errors[0]
                if dtype.is_complex and chosen == set(integral[:_MAX_INTEGRAL]):  # every operand complex
                    complex_errors.update(str(e) for e in outcomes)
    return None


def _run_probes(func: Callable, leaves: list, spec, dtype_of: Callable[[int, torch.Tensor], torch.dtype],
                fill: int) -> BaseException | None:
    """What eager raises for ``func`` on probes of ``leaves`` (None: it runs)."""
    probes = [_probe_of(x, dtype_of(i, x), fill) if isinstance(x, torch.Tensor) else _concrete(x)
              for i, x in enumerate(leaves)]
    args, kwargs = tree_unflatten(probes, spec)
    try:
        func(*args, **kwargs)
    except Exception as err:  # any exception eager raises
        return err
    return None


_FILLS = (0, 1)
_MAX_INTEGRAL = 4


def _subsets(items: list[int]) -> list[set[int]]:
    return [{item for bit, item in enumerate(items) if mask >> bit & 1} for mask in range(2 ** len(items))]


def _promoted(dtypes: set) -> torch.dtype:
    result = torch.bool
    for dtype in dtypes:
        result = torch.promote_types(result, dtype)
    return result


def _integral(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and not (x.dtype.is_floating_point or x.dtype.is_complex)


def _probe_of(x: torch.Tensor, dtype: torch.dtype, fill: int) -> torch.Tensor:
    # sizes of at most 3 (symbolic ones 3): sizes that agree still agree, and ops that need a
    # size of 3 (cross) still get it; every value ``fill`` (``fill + fill i`` for complex ones),
    # booleans False; contiguous where the operand is, every second element of a row where it
    # is not (eager's linear folds a contiguous input into addmm, which refuses a bias of
    # another dtype, and adds a strided bias after its product, which takes it)
    shape = [min(s, 3) if isinstance(s, int) else 3 for s in x.shape]
    strided = not _contiguous(x) and bool(shape)
    if strided:
        shape[-1] *= 2
    value = False if dtype is torch.bool else complex(fill, fill) if dtype.is_complex else fill
    probe = torch.full(shape, value, dtype=dtype)
    return probe[..., ::2] if strided else probe


def _contiguous(x: torch.Tensor) -> bool:
    # a symbolic layout counts as contiguous (no guard on it), as does one with no strides (sparse)
    if x.layout is not torch.strided:
        return True
    return bool(is_contiguous_or_false(x)) or not all(isinstance(s, int) for s in (*x.shape, *x.stride()))


def _concrete(x: Any) -> Any:
    if isinstance(x, _SYMBOLIC):
        return {torch.SymInt: 3, torch.SymFloat: 1.0, torch.SymBool: True}[type(x)]
    if isinstance(x, torch.device):
        return torch.device("cpu")
    return x


@contextlib.contextmanager
def _probing():
    # plain CPU tensors and eager kernels: no fake mode, no tracing, no rule table routing, no
    # functorch transform (the trace's functionalization would turn an in-place probe functional)
    # and the CPU generator's state kept: a probe of a random op must not move the numbers the
    # program draws after it
    with unset_fake_temporarily(), disable_proxy_modes_tracing(), _disable_current_modes(), torch.no_grad(), \
            temporarily_clear_interpreter_stack(), warnings.catch_warnings(), torch.random.fork_rng(devices=[]):
        warnings.simplefilter("ignore")
        yield
