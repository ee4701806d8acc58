"""Errors realify raises. Each names what is wrong and what to do about it.

Every error is a :class:`RealifyError`; those about something realify does not do are also
``NotImplementedError``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class RealifyError(RuntimeError):
    """Base class of every error realify raises.

    Catch it to handle any of realify's errors at once; each subclass says what went wrong and
    its message what to do. It is a ``RuntimeError``.

    Examples
    --------
    >>> import torch
    >>> import realify
    >>> [issubclass(error, realify.RealifyError) for error in (realify.MissingRuleError, realify.RuleConflictError)]
    [True, True]
    >>> try:  # a second rule for an op realify has a rule for
    ...     realify.rules.register(torch.ops.aten.mul.Tensor)(lambda self, other: self)
    ... except realify.RealifyError as error:
    ...     print(type(error).__name__)
    RuleConflictError
    """


class MissingRuleError(RealifyError, NotImplementedError):
    """A complex op has no planar rule and no decomposition that realify can use.

    Raised by :func:`realify.decompose` and :func:`realify.export`, whose real-only graphs
    cannot call back into eager PyTorch, by the compile backend in strict mode
    (``realify.compile(..., strict=True)`` or ``realify.config.strict``) instead of running
    the op as an eager island, and by the eager :class:`~realify.ComplexTensor`. The message
    names the op, the line of your program that called it, and what to do: compute the op
    outside the program, let the compile backend run it as an eager island, or register a
    rule for it (:func:`realify.rules.register`). A rule may raise it too, to decline one form
    of its op.

    It is also a ``NotImplementedError``.

    Parameters
    ----------
    op : object
        The op (an ``OpOverload``, or its name).
    where : str, optional
        The user's source line that called it (``file:line in function: code``), where the
        trace recorded one.
    detail : str, optional
        Why a rule declined the op (``MissingRuleError(op, detail=...)`` raised by a rule).
    advice : str, optional
        What to do, which depends on the entry point. None gives the compile backend's advice
        (strict mode); ``decompose`` and ``export`` give their own.

    Attributes
    ----------
    op : object
        The op.
    where : str or None
        The source line that called it.
    detail : str or None
        Why a rule declined it.
    advice : str
        What to do.

    Examples
    --------
    An op of your own (a ``torch.library`` custom op) that realify has no rule for, compiled
    in strict mode:

    >>> import torch
    >>> import realify
    >>> @torch.library.custom_op("docs_missing_rule::twist", mutates_args=())
    ... def twist(z: torch.Tensor) -> torch.Tensor:
    ...     return z * torch.exp(1j * z.abs())
    >>> @twist.register_fake
    ... def _(z):
    ...     return torch.empty_like(z)
    >>> def program(z):
    ...     return torch.ops.docs_missing_rule.twist(z) + 1
    >>> realify.compile(program, inner="eager", strict=True)(torch.tensor([1 + 2j]))
    Traceback (most recent call last):
        ...
    realify.errors.MissingRuleError: realify has no rule for docs_missing_rule.twist.default on complex tensors ...
      at: ... in program: return torch.ops.docs_missing_rule.twist(z) + 1
      What to do: run this op outside the compiled region, ...
    """

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
    """Return `` (did you mean 'x'?)`` for the choice closest to a misspelled ``name``.

    Where no choice is close, return an empty string.
    """
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
    """The program changes the shape or strides of one of its inputs in place.

    Raised by :func:`realify.decompose` and :func:`realify.export` for an in-place view of an
    input (``z.t_()``, ``z.unsqueeze_(0)``, ``z.transpose_(0, 1)``, ``z.as_strided_(...)``):
    a decomposed or exported graph cannot change its caller's tensor's metadata. Use the
    out-of-place view instead (``z.t()`` for ``z.t_()``) and return its result;
    :func:`realify.compile` runs such programs as written. It is also a
    ``NotImplementedError``.

    Examples
    --------
    >>> import torch
    >>> import realify
    >>> def program(z):
    ...     z.t_()
    ...     return z * 2
    >>> realify.decompose(program, [torch.tensor([[1 + 2j, 3 - 1j]])])
    Traceback (most recent call last):
        ...
    realify.errors.InputMetadataChangeError: the program changes the shape or strides of its input 0 (z) in place,
    from (1, 2) to (2, 1) ...
      What to do: use the out-of-place view (z.t() for z.t_()) and return its result; ...
    """


class RuleConflictError(RealifyError):
    """A second rule was registered for an op that has one.

    Raised by :func:`realify.rules.register` and :func:`realify.rules.register_each`, before
    the table changes for that op. To replace the rule (your own rule for an op realify
    covers, or a notebook cell run twice), register with ``override=True``; graphs compiled
    before keep the old rule.

    Examples
    --------
    >>> import torch
    >>> import realify
    >>> @realify.rules.register(torch.ops.aten.mul.Tensor)
    ... def my_mul(self, other):
    ...     return self
    Traceback (most recent call last):
        ...
    realify.errors.RuleConflictError: aten.mul.Tensor already has the rule realify.rules.arithmetic.mul;
    cannot also register ...my_mul (pass register(..., override=True) to replace it)
    """


class OptionsChangedError(RealifyError):
    """A compiled function was called after a ``realify.config`` option it depends on changed.

    Raised by a function compiled with the realify backend when ``gemm_multiplications``,
    ``gemm_form`` or ``complex_autocast`` differ from what they were when it was compiled:
    dynamo does not guard on realify's options, and the compiled code would keep computing
    with the old value. Set the option for every call of the compiled function
    (``realify.config.patch`` around all of them, or assign it once), or call
    ``torch._dynamo.reset()`` after changing it, to compile again.

    Examples
    --------
    >>> import torch
    >>> import realify
    >>> square = realify.compile(lambda z: z * z, inner="eager")
    >>> z = torch.tensor([1 + 2j])
    >>> square(z)
    tensor([-3.+4.j])
    >>> with realify.config.patch(gemm_multiplications=4):
    ...     square(z)
    Traceback (most recent call last):
        ...
    realify.errors.OptionsChangedError: realify.config changed since this function was compiled
    (gemm_multiplications from 3 to 4) ...
    """


class NoOnnxFormError(RealifyError, NotImplementedError):
    """``realify.onnx`` has no form in ONNX operators for an op of the exported program.

    Raised by :func:`realify.onnx.to_onnx` before ``torch.onnx.export`` runs, for an op ONNX
    has no operator for and no real-arithmetic translation is written (or practical) for:
    the matrix exponential, a general eigenproblem, an ``as_strided`` of a strided view, a
    form written for one size used with dynamic sizes. Compute the op outside the exported
    model (on its inputs before, or its outputs after), export with the sizes static where
    the message says so, or give ``torch.onnx`` a translation of your own
    (``to_onnx(..., custom_translation_table={...})``). The program itself runs under the
    compile backend and in the ExportedProgram of :func:`realify.export`. It is also a
    ``NotImplementedError``.

    Parameters
    ----------
    op : object
        The op, as the message names it.
    why : str
        Why ONNX cannot run it, and what to do instead.

    Attributes
    ----------
    op : object
        The op.
    why : str
        The reason.

    Examples
    --------
    >>> import torch
    >>> import realify.onnx
    >>> realify.onnx.to_onnx(torch.linalg.matrix_exp, (torch.eye(2, dtype=torch.complex64),))
    Traceback (most recent call last):
        ...
    realify.errors.NoOnnxFormError: realify.onnx cannot write torch.linalg.matrix_exp in ONNX operators: ...
      What to do: compute it outside the exported model (on its inputs before, or its outputs after), ...
    """

    def __init__(self, op: object, why: str):
        self.op, self.why = op, why
        super().__init__(
            f"realify.onnx cannot write {op} in ONNX operators: {why}\n  What to do: compute it outside the "
            "exported model (on its inputs before, or its outputs after), or give torch.onnx a translation "
            "with to_onnx(..., custom_translation_table={...}); the program itself runs under "
            "torch.compile(backend=\"realify\") and in the ExportedProgram, which call LAPACK.")


class ComplexLeakError(RealifyError):
    """A graph that should be real-only still holds a complex value.

    Raised by :func:`realify.decompose` and :func:`realify.export` when a complex value
    remains inside the graph they made (the message lists the nodes), anywhere but at its
    complex inputs and outputs. It points at a bug, most often a rule that built an ordinary
    complex tensor instead of returning ComplexTensor or real tensors: check the rules of the
    ops the message names (a rule of your own first), and report it if they are realify's.

    Examples
    --------
    A correct rule table never leaves one, so this shows only how to catch it:

    >>> import torch
    >>> import realify
    >>> issubclass(realify.ComplexLeakError, realify.RealifyError)
    True
    >>> def real_graph(program, inputs):
    ...     try:
    ...         return realify.decompose(program, inputs)
    ...     except realify.ComplexLeakError as error:
    ...         print("a rule returned a complex tensor:", error)
    ...         raise
    >>> z = torch.tensor([1 + 2j])
    >>> real_graph(lambda z: z * 2, [z])(z)
    [tensor([2.+4.j])]
    """
