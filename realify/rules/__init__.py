"""The op-rule table: one planar rule per aten overload (or overload packet).

A rule is a plain function with the op's signature. Complex operands arrive as
:class:`realify.ComplexTensor` (use ``.re`` / ``.im``, or :func:`parts` which also accepts
real tensors and Python numbers); it returns ComplexTensor or real tensors. The same rule
serves the eager ``ComplexTensor`` front end and the traced ``decompose`` engine.

Lookup order for an op: exact overload, overload packet, then the generic handling of
in-place (``op_``) and ``out=`` variants through their functional rule, then PyTorch's own
decompositions (composite ops), and finally :class:`MissingRuleError` naming the op.

A pointwise rule whose values come from special-value code carries its derivative formula: a
function of one complex argument through ``register(op, derivative=...)``, a rule of several
operands by computing with a :class:`Formula` through :func:`apply`.
"""

from ..runtime.complex_tensor import answer_aten_ops_with
from ._derivative import Formula, apply
from ._operands import complex_like, make_complex, parts, promoted, result_dtype
from ._registry import (
    Rule,
    apply_checked,
    apply_rule,
    check_contract,
    contract_checked_before,
    describe_rule,
    lookup,
    one_argument_functions,
    register,
    register_each,
)

answer_aten_ops_with(apply_checked)

__all__ = ["Formula", "Rule", "apply", "apply_checked", "apply_rule", "check_contract", "complex_like",
           "contract_checked_before", "describe_rule", "lookup", "make_complex", "one_argument_functions", "parts",
           "promoted", "register", "register_each", "result_dtype"]
