"""Errors realify raises. Each names what is wrong and what to do about it."""

from __future__ import annotations


class RealifyError(RuntimeError):
    """Base class of every error raised by realify."""


class MissingRuleError(RealifyError, NotImplementedError):
    """A complex op has no planar rule and no decomposition that realify can use."""

    def __init__(self, op: object, where: str | None = None, detail: str | None = None):
        self.op = op
        self.where = where
        self.detail = detail
        msg = f"realify has no rule for {op} on complex tensors"
        if detail:
            msg += f" ({detail})"
        if where:
            msg += f"\n  at: {where}"
        msg += (
            "\n  What to do: run this op outside the compiled region, pass strict=False to let "
            "realify run it as an eager island, or register a rule with "
            "realify.rules.register(...) (see docs/rules.md)."
        )
        super().__init__(msg)


class RuleConflictError(RealifyError):
    """Two rules were registered for the same op."""


class ComplexLeakError(RealifyError):
    """A graph that should be real-only still holds a complex value."""
