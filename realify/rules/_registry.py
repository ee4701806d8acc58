"""The op-rule table itself: registration, lookup, and the generic handling of ops without a
rule of their own (in-place and ``out=`` variants through their functional rule, composite ops
through PyTorch's decompositions). The rule families (the package's public modules) register
on first lookup."""

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

    With ``derivative``, the decorated function is instead the planar kernel of a pointwise
    function of one complex argument, ``kernel(x, y) -> (re, im)`` (or one real tensor), and
    ``ops`` is that function's one overload: its rule is the :class:`OneArgument` declaration
    made of the kernel, ``derivative(g, z, w) -> grad z`` (eager's formula, realify/rules/_derivative.py),
    ``real_operand`` (the rule's value for a real operand; None: the operand with a +0
    imaginary part) and ``eager_by_formula`` (whether the eager ComplexTensor front end
    differentiates the function by this formula, realify/tensor.py). The kernel is returned as it
    is, for other kernels to call.

    An op that has a rule already raises :class:`RuleConflictError`, unless ``override=True``:
    then the new rule replaces it (a user's own rule for an op realify covers, or a notebook
    cell run twice), and the replacement is logged. Graphs compiled before keep the old rule."""

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
    """Register ``make_rule(op, *args, **kwargs)`` as the rule of each op in ``ops``: the one
    way to give a family of ops one formula built per op (each part through the op itself, a
    factory run per part, an error that names the op). A rule written by hand for its ops
    uses :func:`register` as a decorator."""
    for op in ops:
        register(op, override=override)(make_rule(op, *args, **kwargs))


def lookup(func: OpOverload) -> Rule | None:
    """The rule for ``func``: its exact overload first, then its packet."""
    load_families()
    rule = _TABLE.get(func)
    if rule is None and isinstance(func, OpOverload):
        rule = _TABLE.get(func.overloadpacket)
    return rule


@functools.cache
def one_argument_functions() -> dict[str, OneArgument]:
    """The functions of one complex argument declared in the table (``register(op,
    derivative=...)``), by name: every list the front ends and the tests need of them."""
    load_families()
    return {rule.name: rule for rule in _TABLE.values() if isinstance(rule, OneArgument)}


def describe_rule(func: OpOverload) -> str | None:
    """What :func:`apply_rule` runs for ``func``, in words (None: nothing; a complex call of it
    is an eager island or an error): the rule's qualified name, or the generic path."""
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
    """The calls under it are not checked against eager's contract again: the front end
    checked the program as written (:func:`check_contract`), before decomposition replaced
    its ops with others that eager holds to another contract (linear with a bias of another
    dtype, which eager takes, becomes addmm, which eager refuses)."""
    before = getattr(_nesting, "checked_before", False)
    _nesting.checked_before = True
    try:
        yield
    finally:
        _nesting.checked_before = before


def check_contract(gm: torch.fx.GraphModule, where: Callable[[torch.fx.Node], str | None]) -> None:
    """Eager's contract on every op of ``gm`` with a complex operand, from the fake values its
    nodes hold (``meta["val"]``): what eager raises is raised, naming ``where(node)``. Before
    decomposition, whose functional form of an in-place op (the op, then a copy) no longer
    carries the refusal of a complex result written into a real tensor."""
    for node in gm.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, OpOverload):
            continue
        args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: n.meta.get("val"))
        if not any(isinstance(x, torch.Tensor) and x.is_complex() for x in tree_leaves((args, kwargs))):
            continue
        error = refusal(node.target, args, kwargs, where=functools.partial(where, node))
        if error is not None:
            raise error


def apply_checked(func: OpOverload, args: tuple, kwargs: dict, where: Callable[[], str | None] | None = None) -> Any:
    """:func:`apply_rule` for a call the user's program makes (not one a rule makes inside its
    own computation): eager's contract on the operands' dtypes is checked first
    (realify/rules/_contract.py), and what eager raises is raised, naming ``where()``."""
    depth = getattr(_nesting, "depth", 0)
    if depth == 0 and not getattr(_nesting, "checked_before", False):
        error = refusal(func, args, kwargs, where) if isinstance(func, OpOverload) else None
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
