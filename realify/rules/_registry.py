"""The op-rule table itself: registration, lookup, and the ops without a rule of their own.

In-place and ``out=`` variants run through their functional rule, composite ops through
PyTorch's decompositions. The rule families (the package's public modules) register on first
lookup.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch
from torch._ops import OpOverload, OpOverloadPacket
from torch.utils._pytree import tree_leaves

from ..errors import MissingRuleError, RealifyError, RuleConflictError
from ._contract import eager_error, refusal
from ._derivative import OneArgument
from ._families import PACKAGE as _PACKAGE
from ._families import load_families

log = logging.getLogger("realify")

Rule = Callable[..., Any]
# how deep in rules the current thread is: 0 outside every rule (calls the user's program makes)
_nesting = threading.local()
_TABLE: dict[object, Rule] = {}
aten = torch.ops.aten


def register(*ops: OpOverload | OpOverloadPacket, override: bool = False, derivative: Callable | None = None,
             real_operand: Callable | None = None, eager_by_formula: bool = True) -> Callable[[Rule], Rule]:
    """Register the decorated function as the planar rule of each op in ``ops``.

    Used as a decorator: ``@register(aten.my_op.default)`` above a function with the op's
    signature, which receives complex operands as :class:`realify.ComplexTensor` (real tensors
    and Python numbers as they are) and returns ComplexTensor or real tensors. realify's own
    rules are loaded first, so a user's rule registered with ``override=True`` replaces
    realify's for good.

    Parameters
    ----------
    *ops : OpOverload or OpOverloadPacket
        The ops the rule answers: overloads (``torch.ops.aten.mul.Tensor``) or whole overload
        packets (``torch.ops.aten.mul``; an overload's own rule is looked up before its
        packet's).
    override : bool, default False
        Replace a rule an op has already (your own rule for an op realify covers, or a notebook
        cell run twice) instead of raising; the replacement is logged at INFO.
    derivative : callable, optional
        Declare a pointwise function of one complex argument instead: the decorated function
        is then its planar kernel, ``kernel(x, y) -> (re, im)`` (or one real tensor) for
        ``z = x + iy``, and ``derivative(g, z, w) -> grad z`` is eager's formula for its
        gradient, on complex values (``C``, with complex arithmetic) for the output gradient
        ``g``, the input ``z`` and the result ``w``. ``ops`` must then be the function's one
        overload.
    real_operand : callable, optional
        With ``derivative``: the rule's value for a real operand, ``real_operand(x)``. None
        (the default) computes the function of ``x + 0i``.
    eager_by_formula : bool, default True
        With ``derivative``: whether the eager ComplexTensor front end differentiates the
        function by this formula (True) or leaves it to PyTorch's autograd (False).

    Returns
    -------
    callable
        The decorator. It registers the function it decorates and returns that function
        unchanged (with ``derivative``, the kernel, for other kernels to call).

    Raises
    ------
    TypeError
        At the call: ``real_operand`` or ``eager_by_formula=False`` without ``derivative``,
        or ``derivative`` with other than exactly one :class:`~torch._ops.OpOverload`.
    RuleConflictError
        When decorating: an op has a rule already and ``override`` is False. The ops before it
        in ``ops`` are registered already.
    ValueError
        When decorating, with ``derivative``: a formula of the function's name exists already,
        other than the one of a rule that ``override=True`` replaces.

    See Also
    --------
    register_each : one rule built per op, for a family of ops.
    lookup : the rule an op has.

    Notes
    -----
    With ``derivative``, the rule of the op is a declaration of the function of one complex
    argument: it runs the kernel as the custom op ``realify::pointwise``, whose backward is the
    formula, whatever branch of special-value code computed the value, and it is listed by
    :func:`one_argument_functions`.

    Graphs compiled before a rule is replaced keep the old rule (``torch._dynamo.reset()``
    compiles them again).

    Examples
    --------
    A rule for an op of your own (here a ``torch.library`` custom op that scales a tensor),
    which realify otherwise could not run on complex tensors:

    >>> import torch
    >>> import realify
    >>> from realify.rules import complex_like, parts, register
    >>> @torch.library.custom_op("docs_register::scale", mutates_args=())
    ... def scale(z: torch.Tensor, factor: float) -> torch.Tensor:
    ...     return z * factor
    >>> @scale.register_fake
    ... def _(z, factor):
    ...     return torch.empty_like(z)
    >>> @register(torch.ops.docs_register.scale.default)
    ... def scale_rule(z, factor):
    ...     re, im = parts(z)  # im is None for a real z
    ...     return complex_like(re * factor, None if im is None else im * factor, z.dtype)
    >>> z = torch.tensor([1 + 2j, 3 - 4j])
    >>> realify.decompose(lambda z: torch.ops.docs_register.scale(z, 2.0), [z])(z)
    [tensor([2.+4.j, 6.-8.j])]

    A second rule for the same op is refused unless it says ``override=True``:

    >>> register(torch.ops.docs_register.scale.default)(scale_rule)  # the same function: no conflict
    <function scale_rule at ...>
    >>> @register(torch.ops.docs_register.scale.default)
    ... def other_rule(z, factor):
    ...     return z
    Traceback (most recent call last):
        ...
    realify.errors.RuleConflictError: docs_register.scale.default already has the rule ...scale_rule; ...
    >>> @register(torch.ops.docs_register.scale.default, override=True)
    ... def other_rule(z, factor):
    ...     return z
    >>> realify.rules.lookup(torch.ops.docs_register.scale.default).__name__
    'other_rule'
    """

    def decorate(fn: Rule) -> Rule:
        if not fn.__module__.startswith(_PACKAGE + "."):
            load_families()  # realify's own rules first, so that a user's replaces them for good
        for op in ops:
            old = _TABLE.get(op)
            if old is not None and old is not fn and not override:
                raise RuleConflictError(
                    f"{op} already has the rule {_name(old)}; cannot also register "
                    f"{_name(fn)} (pass register(..., override=True) to replace it)"
                )
            if isinstance(old, OneArgument) and derivative is not None:
                old.formula.release()  # the new declaration's formula takes the function's name
            rule = fn if derivative is None else OneArgument(op, fn, derivative, real_operand, eager_by_formula)
            if old is not None and old is not rule:
                log.info("rule for %s replaced: %s -> %s", op, _name(old), _name(rule))
            _TABLE[op] = rule
        one_argument_functions.cache_clear()
        return fn

    if derivative is None and (real_operand is not None or not eager_by_formula):
        raise TypeError("register: real_operand and eager_by_formula describe a kernel with a derivative")
    if derivative is not None and not (len(ops) == 1 and isinstance(ops[0], OpOverload)):
        raise TypeError("register(..., derivative=...) takes the one overload the kernel computes")
    return decorate


def _name(rule: Rule) -> str:
    return f"{rule.__module__}.{rule.__name__}"


def register_each(ops: Iterable[OpOverload | OpOverloadPacket], make_rule: Callable[..., Rule], *args: Any,
                  override: bool = False, **kwargs: Any) -> None:
    """Register ``make_rule(op, *args, **kwargs)`` as the rule of each op in ``ops``.

    This is the one way to give a family of ops one formula built per op: each part computed
    through the op itself, a factory run once per part, an error that names the op. A rule
    written by hand for its ops uses :func:`register` as a decorator instead.

    Parameters
    ----------
    ops : iterable of OpOverload or OpOverloadPacket
        The ops of the family, each given the rule made for it.
    make_rule : callable
        ``make_rule(op, *args, **kwargs)`` returns the rule of ``op``, such as
        :func:`realify.rules.shape.partwise_at`.
    *args : Any
        Passed on to ``make_rule`` after the op.
    override : bool, default False
        Replace a rule an op has already instead of raising, as for :func:`register`.
    **kwargs : Any
        Passed on to ``make_rule`` as keyword arguments.

    Raises
    ------
    RuleConflictError
        An op has a rule already and ``override`` is False; the ops before it are registered.

    See Also
    --------
    register : a rule written for its ops.
    realify.rules.shape.functional_overloads : the overloads of a family of ops.

    Examples
    --------
    A custom op that moves elements without combining them computes each part through the op
    itself (:func:`~realify.rules.shape.partwise_at`):

    >>> import torch
    >>> import realify
    >>> from realify.rules import register_each
    >>> from realify.rules.shape import partwise_at
    >>> @torch.library.custom_op("docs_register_each::reverse", mutates_args=())
    ... def reverse(x: torch.Tensor) -> torch.Tensor:
    ...     return x.flip(0)
    >>> @reverse.register_fake
    ... def _(x):
    ...     return torch.empty_like(x)
    >>> register_each([torch.ops.docs_register_each.reverse.default], partwise_at)
    >>> z = torch.tensor([1 + 2j, 3 - 4j])
    >>> realify.decompose(lambda z: torch.ops.docs_register_each.reverse(z), [z])(z)
    [tensor([3.-4.j, 1.+2.j])]
    """
    for op in ops:
        register(op, override=override)(make_rule(op, *args, **kwargs))


def lookup(func: OpOverload) -> Rule | None:
    """Return the rule the table holds for ``func``: its exact overload's first, then its packet's.

    Parameters
    ----------
    func : OpOverload
        The op, such as ``torch.ops.aten.mul.Tensor`` (an overload packet finds the packet's
        own rule only).

    Returns
    -------
    callable or None
        The rule, a function of the op's arguments; for a function of one complex argument
        declared with ``register(op, derivative=...)``, its declaration, whose ``.of(z)``
        computes the function of a complex value with this derivative. None where the table
        has no rule of the op's own: in-place and ``out=`` variants and composite ops may
        still run, through their functional rule or PyTorch's decompositions.

    Raises
    ------
    None
        An op without a rule gives None; :class:`~realify.MissingRuleError` comes from
        running such an op.

    Examples
    --------
    >>> import torch
    >>> from realify.rules import lookup
    >>> rule = lookup(torch.ops.aten.mul.Tensor)
    >>> rule.__module__, rule.__name__
    ('realify.rules.arithmetic', 'mul')
    >>> lookup(torch.ops.aten.add_.Tensor) is None  # in place: runs add's rule, then a copy
    True
    >>> lookup(torch.ops.aten.exp.default).name  # a function of one complex argument
    'exp'
    """
    load_families()
    rule = _TABLE.get(func)
    if rule is None and isinstance(func, OpOverload):
        rule = _TABLE.get(func.overloadpacket)
    return rule


@functools.cache
def one_argument_functions() -> dict[str, OneArgument]:
    """Return the functions of one complex argument the table declares, by name.

    These are the rules registered with ``register(op, derivative=...)``: the front ends and
    the tests read every list they need of such functions from here (the special-value table
    of tests/test_numerics.py, the gradient grid of tests/test_gradients.py). The result is
    cached; registering a rule clears the cache.

    Returns
    -------
    dict of str to declaration
        Each function's name (its op's: ``"exp"`` for ``aten.exp.default``) and its
        declaration, whose ``op`` is the overload and ``kernel`` the planar kernel.

    Raises
    ------
    None
        It only reads the table.

    Examples
    --------
    >>> import torch
    >>> from realify.rules import one_argument_functions
    >>> functions = one_argument_functions()
    >>> "exp" in functions, "mul" in functions
    (True, False)
    >>> functions["exp"].op
    <OpOverload(op='aten.exp', overload='default')>
    """
    load_families()
    return {rule.name: rule for rule in _TABLE.values() if isinstance(rule, OneArgument)}


def has_own_rule(func: OpOverload) -> bool:
    """Tell whether a rule of realify's own decides ``func`` on complex operands.

    Directly, or through its functional variant; not PyTorch's decomposition, not nothing.
    """
    if lookup(func) is not None:
        return True
    functional = _functional_variant(func)
    return functional is not None and lookup(functional) is not None


def describe_rule(func: OpOverload) -> str | None:
    """Return what :func:`apply_rule` runs for ``func``, in words.

    That is the rule's qualified name, or the generic path; None: nothing, and a complex call
    of it is an eager island or an error.
    """
    rule = lookup(func)
    if rule is not None:
        maker, made = rule.__qualname__.partition(".<locals>")[:2]  # a rule a factory made: the factory
        return f"{rule.__module__}.{maker}" + (" (made per op)" if made else "")
    if isinstance(func, OpOverload):
        functional = _functional_variant(func)
        if functional is not None:
            inner = describe_rule(functional)
            return f"{functional}'s rule, then a copy ({inner})" if inner else None
        if _decomposition(func) is not None:
            return "PyTorch's decomposition, through the rules of its ops"
    return None


@contextlib.contextmanager
def contract_checked_before() -> Iterator[None]:
    """Skip the check against eager's contract for the calls under it.

    The front end checked the program as written (:func:`check_contract`), before decomposition
    replaced its ops with others that eager holds to another contract (linear with a bias of
    another dtype, which eager takes, becomes addmm, which eager refuses).
    """
    before = getattr(_nesting, "checked_before", False)
    _nesting.checked_before = True
    try:
        yield
    finally:
        _nesting.checked_before = before


def check_contract(gm: torch.fx.GraphModule, where: Callable[[torch.fx.Node], str | None]) -> None:
    """Check eager's contract on every op of ``gm`` with a complex operand.

    The check reads the fake values its nodes hold (``meta["val"]``): what eager raises is
    raised, naming ``where(node)``. It runs before decomposition, whose functional form of an
    in-place op (the op, then a copy) no longer carries the refusal of a complex result written
    into a real tensor.
    """
    for node in gm.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, OpOverload):
            continue
        args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: n.meta.get("val"))
        if not any((isinstance(x, torch.Tensor) and x.is_complex()) or (isinstance(x, torch.dtype) and x.is_complex)
                   for x in tree_leaves((args, kwargs))):  # a complex operand, or a factory's complex dtype
            continue
        error = refusal(node.target, args, kwargs, where=functools.partial(where, node),
                        ruled=has_own_rule(node.target))
        if error is not None:
            raise error


def apply_checked(func: OpOverload, args: tuple, kwargs: dict, where: Callable[[], str | None] | None = None) -> Any:
    """Run :func:`apply_rule` for a call the user's program makes, checking eager's contract first.

    This is for a call of the program itself, not one a rule makes inside its own computation:
    eager's contract on the operands' dtypes is checked first (realify/rules/_contract.py), and
    what eager raises is raised, naming ``where()``.
    """
    depth = getattr(_nesting, "depth", 0)
    if depth == 0 and not getattr(_nesting, "checked_before", False):
        error = refusal(func, args, kwargs, where, ruled=has_own_rule(func)) if isinstance(func, OpOverload) else None
        if error is not None:
            raise error
    _nesting.depth = depth + 1
    try:
        return apply_rule(func, args, kwargs)
    except (RealifyError, NotImplementedError):
        raise
    except Exception as err:
        # a rule that failed on operands eager refuses too, with another exception type: eager's
        # exception and message (a rule's error of eager's type is its own, read from the data:
        # a matrix that is not positive-definite, at its order)
        eager = eager_error(func, args, kwargs, where) if depth == 0 and isinstance(func, OpOverload) else None
        if eager is None or isinstance(err, type(eager)):
            raise
        raise eager from err
    finally:
        _nesting.depth = depth


def apply_rule(func: OpOverload, args: tuple, kwargs: dict) -> Any:
    """Run ``func`` on planar operands, through its rule or a generic fallback."""
    rule = lookup(func)
    if rule is not None:
        return rule(*args, **kwargs)
    if isinstance(func, OpOverload):
        functional = _functional_variant(func)
        if functional is not None:
            return _apply_mutating(func, functional, args, kwargs)
        decomposition = _decomposition(func)
        if decomposition is not None:
            return decomposition(*args, **kwargs)
    raise MissingRuleError(func)


def _functional_variant(func: OpOverload) -> OpOverload | None:
    """aten.add.Tensor for aten.add_.Tensor and aten.add.out; None for functional ops."""
    schema = func._schema
    name = func.overloadpacket.__name__
    first = schema.arguments[0] if schema.arguments else None
    writes_self = first is not None and not first.is_out and first.alias_info is not None and first.alias_info.is_write
    if name.endswith("_") and not name.startswith("_") and writes_self:
        packet = getattr(aten, name[:-1], None)
        overload = func._overloadname
    elif any(a.is_out for a in schema.arguments):
        packet, overload = func.overloadpacket, "default"
        if not hasattr(packet, overload):
            candidates = [o for o in packet.overloads() if "out" not in o]
            overload = candidates[0] if len(candidates) == 1 else None
    else:
        return None
    if packet is None or overload is None or not hasattr(packet, overload):
        return None
    return getattr(packet, overload)


def _apply_mutating(func: OpOverload, functional: OpOverload, args: tuple, kwargs: dict) -> Any:
    """In-place op: compute functionally, then copy into ``self``. out= op: copy into out."""
    kwargs = dict(kwargs)
    out_names = [a.name for a in func._schema.arguments if a.is_out]
    if out_names:
        outs = [kwargs.pop(n) for n in out_names]
        result = apply_rule(functional, args, kwargs)
        results = result if isinstance(result, (tuple, list)) else (result,)
        for dest, value in zip(outs, results):
            _resize_like(dest, value)
            aten.copy_.default(dest, value)
        return outs[0] if len(outs) == 1 else tuple(outs)
    result = apply_rule(functional, args, kwargs)
    aten.copy_.default(args[0], result)
    return args[0]


def _resize_like(dest: torch.Tensor, value: torch.Tensor) -> None:
    if dest.shape != value.shape:
        aten.resize_.default(dest, value.shape)


@functools.cache
def _decomposition(func: OpOverload) -> Rule | None:
    from torch._decomp import decomposition_table

    decomposition = decomposition_table.get(func)
    if decomposition is not None:
        return decomposition
    if func._can_decompose():
        return func.decompose
    return None
