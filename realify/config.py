"""Global options of realify, read when a graph is traced or compiled.

Change them with :func:`patch` (a context manager and decorator) or by assignment, e.g.
``realify.config.gemm_multiplications = 4``; :func:`snapshot` reads them all. :func:`patch`
checks the values it sets at once; an assigned value is checked only where it is read.

Attributes
----------
gemm_multiplications : int
    3 or 4, default 3. Complex matrix products (mm, bmm, addmm, baddbmm, addbmm and what
    lowers to them: matmul, einsum, linear, ...) and ``aten.convolution`` run as 3 real
    products (Gauss/Karatsuba, 25% fewer flops) or 4 (the textbook formula), in every traced
    graph (compile, export, decompose: realify/passes/gauss.py, read when a graph is traced);
    the eager ComplexTensor computes the textbook form. PyTorch's own ``conv1d/2d/3d`` and
    ``conv_transpose*d`` on complex inputs are three real convolutions (Gauss's form) before
    realify sees them, so 4 does not reach those calls (under ``complex_autocast`` conv*d is
    traced as ``aten.convolution``, in 4 products). See docs/numerics.md for the error bound
    that makes 3 the default.
interleaved_products : bool
    Default True. In the compile backend, a complex product whose factor already sits
    interleaved in memory (``view_as_complex`` of a real tensor, as in rotary embeddings) runs
    on the (re, im) pairs with the ``realify::cmul_pairs`` op (ATen's vectorized complex kernel)
    instead of planar arithmetic on stride-2 loads; and a matrix product may run as BLAS's
    complex GEMM on the pairs (``realify::cmm_pairs``, eager's rounding), whatever
    ``gemm_multiplications`` says, where ``gemm_form`` picks that form: by measurement, or by
    the threshold rule (``mm``/``bmm`` with ``m n k / (m k + k n + m n)`` below
    ``realify.passes.layout.PAIRS_GEMM_INTENSITY``, about 576 x 576 square, and an inner
    dimension of at least 16: converting to planes costs more there than the real GEMMs save;
    the layout pass, realify/passes/layout.py, read when a graph compiles). Off, every product
    is planar real arithmetic, as in what ``realify.export`` produces for runtimes that know
    only standard ops.
gemm_form : str
    Default ``"measure"``. How the compile backend picks the form of each complex matrix
    product (``mm``, ``bmm`` and what lowers to them: matmul, einsum, linear, ...):

    - ``"measure"``: it times each candidate form on random data of the product's shapes,
      strides and dtype (a few runs, their median) and keeps the fastest, as Inductor's
      autotuning does; the timings are cached on disk in ``gemm_forms.json`` under
      ``$REALIFY_CACHE_DIR`` (default ``~/.cache/realify``), keyed by the CPU model and its
      vector flags, torch's version and thread count, the op, its operands' shapes and
      strides and the dtype, so each shape is timed once per machine. At symbolic sizes, for
      an inner dimension below 16 and for products too small to time (below 32^3 complex
      multiply-adds), the threshold rule decides instead;
    - ``"threshold"``: the fixed rule of ``interleaved_products`` below;
    - ``"pairs"``, ``"4m"``, ``"3m"``: that form for every product: BLAS's complex GEMM on the
      (re, im) pairs (eager's kernel and rounding; at symbolic sizes the products stay
      planar), four real products (the textbook formula; ``"4m"`` also keeps convolutions in
      four), or three (Gauss's form).

    The candidates are what the other options allow: the pairs only with
    ``interleaved_products`` on; three products only where ``gemm_multiplications`` is 3, so
    ``gemm_multiplications=4`` keeps its error bound whatever this option says (``"3m"`` then
    gives four); four products always, the most accurate planar form, so picking it never
    loosens a bound. A forced form that is not a candidate gives ``gemm_multiplications``'
    planar form. ``realify.export`` and ``realify.decompose`` do not read it: their programs
    hold standard ops only, in ``gemm_multiplications``' form (realify/passes/gemm_form.py,
    read when a graph compiles).
complex_autocast : bool
    Default False. Under ``torch.autocast``, the real GEMMs and convolutions of complex
    matmul/bmm/einsum/linear/conv*d run on autocast's dtype (bfloat16 or float16 operands,
    float32 results), as autocast runs real ones; FFTs, elementwise ops and reductions stay
    float32 and parameters complex64 (realify/passes/autocast.py, read when a graph is traced:
    compile and decompose; the eager ComplexTensor computes complex64). Off, complex ops keep
    complex64 under autocast, as in eager. docs/numerics.md ("Complex mixed precision") gives
    the error bound.
strict : bool
    Default False. In the compile backend, raise :class:`~realify.MissingRuleError` for a
    complex op with no rule instead of running it as an eager island
    (``realify.compile(..., strict=...)`` overrides it for one function).

Notes
-----
A function compiled by the backend raises :class:`~realify.OptionsChangedError` when called
after ``gemm_multiplications``, ``gemm_form`` or ``complex_autocast`` changed: dynamo does not guard on
realify's options, and the compiled code keeps the values it was compiled under. Set such an
option for every call of the compiled function, or call ``torch._dynamo.reset()`` after
changing it to compile again.

Examples
--------
>>> import realify
>>> realify.config.gemm_multiplications
3
>>> with realify.config.patch(gemm_multiplications=4):
...     realify.config.gemm_multiplications
4
>>> realify.config.gemm_multiplications
3
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any

from .errors import closest

gemm_multiplications: int = 3
interleaved_products: bool = True
gemm_form: str = "measure"
complex_autocast: bool = False
strict: bool = False

_module = sys.modules[__name__]
_OPTIONS = ("gemm_multiplications", "interleaved_products", "gemm_form", "complex_autocast", "strict")
_GEMM_FORMS = ("measure", "threshold", "pairs", "4m", "3m")


def _validate(name: str, value: Any) -> None:
    if name not in _OPTIONS:
        raise AttributeError(f"realify.config has no option {name!r}{closest(name, _OPTIONS)}; options are "
                             f"{', '.join(_OPTIONS)}")
    if name == "gemm_multiplications" and value not in (3, 4):
        raise ValueError(f"gemm_multiplications must be 3 or 4, got {value!r}")
    if name == "gemm_form" and value not in _GEMM_FORMS:
        hint = closest(value.lower(), _GEMM_FORMS) if isinstance(value, str) else ""
        raise ValueError(f"gemm_form must be one of {', '.join(map(repr, _GEMM_FORMS))}, got {value!r}{hint}")
    if name in ("interleaved_products", "complex_autocast", "strict") and not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")


class _Patch(contextlib.ContextDecorator):
    def __init__(self, changes: dict[str, Any]):
        for name, value in changes.items():
            _validate(name, value)
        self.changes = changes
        self.saved: list[dict[str, Any]] = []

    def __enter__(self):
        self.saved.append({name: getattr(_module, name) for name in self.changes})
        for name, value in self.changes.items():
            setattr(_module, name, value)
        return self

    def __exit__(self, *exc):
        for name, value in self.saved.pop().items():
            setattr(_module, name, value)
        return False


def patch(**changes: Any) -> _Patch:
    """Set options for the duration of a ``with`` block or of a decorated function's calls.

    Each use saves the options it changes on entry and restores them on exit, also when the
    block raises, so uses nest; one object may be entered again, or decorate a function that
    calls itself.

    Parameters
    ----------
    **changes : Any
        The options to set and their values, by name: ``gemm_multiplications`` (3 or 4),
        ``gemm_form`` (``"measure"``, ``"threshold"``, ``"pairs"``, ``"4m"`` or ``"3m"``),
        ``interleaved_products``, ``complex_autocast``, ``strict`` (True or False). See
        :mod:`realify.config`.

    Returns
    -------
    contextlib.ContextDecorator
        A context manager that sets ``changes`` while it is open, usable as a decorator too.

    Raises
    ------
    AttributeError
        A name in ``changes`` is not an option; the message names the closest one.
    ValueError
        ``gemm_multiplications`` is not 3 or 4, or ``gemm_form`` not one of its values.
    TypeError
        ``interleaved_products``, ``complex_autocast`` or ``strict`` is not a bool.

    Examples
    --------
    >>> import realify
    >>> with realify.config.patch(gemm_multiplications=4, strict=True):
    ...     realify.config.gemm_multiplications, realify.config.strict
    (4, True)
    >>> realify.config.gemm_multiplications, realify.config.strict
    (3, False)
    >>> @realify.config.patch(interleaved_products=False)
    ... def planar_only():
    ...     return realify.config.interleaved_products
    >>> planar_only()
    False
    >>> realify.config.patch(gemm_multiplications=2)
    Traceback (most recent call last):
        ...
    ValueError: gemm_multiplications must be 3 or 4, got 2
    """
    return _Patch(changes)


def snapshot() -> dict[str, Any]:
    """Return the current value of every option.

    The options change what a traced graph computes, so a cache of compiled programs keys on
    them; ``realify.config.patch(**saved)`` restores a snapshot taken earlier.

    Returns
    -------
    dict of str to Any
        Each option's name and value, in the order of :mod:`realify.config`'s Attributes.

    Raises
    ------
    None
        It only reads the options.

    Examples
    --------
    >>> import realify
    >>> realify.config.snapshot()
    {'gemm_multiplications': 3, 'interleaved_products': True, 'gemm_form': 'measure', 'complex_autocast': False,
     'strict': False}
    >>> with realify.config.patch(complex_autocast=True):
    ...     realify.config.snapshot()["complex_autocast"]
    True
    """
    return {name: getattr(_module, name) for name in _OPTIONS}
