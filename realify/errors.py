"""Errors realify raises. Each names what is wrong and what to do about it."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class RealifyError(RuntimeError):
    """Base class of every error raised by realify."""


class MissingRuleError(RealifyError, NotImplementedError):
    """A complex op has no planar rule and no decomposition that realify can use.

    ``op`` is the op, ``where`` the user's source line that called it (``file:line in
    function: code``) where the trace recorded one, ``detail`` why a rule declined, and
    ``advice`` what to do, which depends on the entry point (:data:`COMPILE_ADVICE`, the
    default, is the compile backend's in strict mode; ``decompose`` and ``export`` give their
    own)."""

    def __init__(self, op: object, where: str | None = None, detail: str | None = None,
                 advice: str | None = None):
        self.op = op
        self.where = where
        self.detail = detail
        self.advice = COMPILE_ADVICE if advice is None else advice
        msg = f"realify has no rule for {op} on complex tensors"
        if detail:
            msg += f" ({detail})"
        if where:
            msg += f"\n  at: {where}"
        msg += f"\n  What to do: {self.advice}"
        super().__init__(msg)


def closest(name: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the choice closest to a misspelled ``name``, or nothing
    where none is close."""
    match = difflib.get_close_matches(name, list(choices), n=1)
    return f" (did you mean {match[0]!r}?)" if match else ""


# Messages name a page of realify's documentation by its title (a section in quotes after it),
# as a reader finds it on the site: the repository's paths mean nothing to an installed package's user.
RULES_PAGE = "realify's docs page 'Writing a rule'"

# What to do about a missing rule, per entry point: each names only options that entry point has.
COMPILE_ADVICE = (
    "run this op outside the compiled region, call realify.compile(..., strict=False) (with "
    "realify.config.strict off) to let realify run it as an eager island, or register a rule with "
    f"realify.rules.register(...) (see {RULES_PAGE})."
)
DECOMPOSE_ADVICE = (
    "realify.decompose makes a real-only graph, which has no eager islands: compute this op outside "
    "the decomposed program (on its inputs before, or its outputs after), compile the program with "
    "realify.compile(...) instead (which runs the op as an eager island), pass "
    "decompose(..., on_missing=...) to emit your own replacement, or register a rule with "
    f"realify.rules.register(...) (see {RULES_PAGE})."
)


class InputMetadataChangeError(RealifyError, NotImplementedError):
    """The program changes the shape or strides of one of its inputs in place (``z.t_()``), which a
    decomposed or exported graph cannot do to its caller's tensor."""


class RuleConflictError(RealifyError):
    """Two rules were registered for the same op."""


class OptionsChangedError(RealifyError):
    """A compiled function was called after a realify.config option it depends on changed."""


class NoOnnxFormError(RealifyError, NotImplementedError):
    """realify.onnx has no form in ONNX operators for an op of the exported program (``op``),
    for the reason given (``why``): ONNX has no such operator, and no real-arithmetic
    translation is written (or practical) for it."""

    def __init__(self, op: object, why: str):
        self.op, self.why = op, why
        super().__init__(
            f"realify.onnx cannot write {op} in ONNX operators: {why}\n  What to do: compute it outside the "
            "exported model (on its inputs before, or its outputs after), or give torch.onnx a translation "
            "with to_onnx(..., custom_translation_table={...}); the program itself runs under "
            "torch.compile(backend=\"realify\") and in the ExportedProgram, which call LAPACK.")


class ComplexLeakError(RealifyError):
    """A graph that should be real-only still holds a complex value."""
