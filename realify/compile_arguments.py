"""realify.compile's arguments, checked when it is called.

Dynamo calls the backend lazily, at the first call of the compiled function, and wraps what it
raises in BackendCompilerFailed: a misspelled compiler or option would surface only there. Each
check names the argument and what it accepts. Inductor's mode and config keys are translated
here too, as torch.compile translates them for its default backend.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import torch

from .errors import closest

_OWN_INNER = ("inductor", "eager")
_BOOLEAN_KEYWORDS = ("fullgraph", "disable", "isolate_recompiles")


@functools.cache
def _torch_compile_keywords() -> tuple[str, ...]:
    """Return torch.compile's keyword arguments that realify.compile passes on.

    They are read from torch.compile itself: they differ between torch releases; model and
    backend are realify.compile's own.
    """
    return tuple(n for n in inspect.signature(torch.compile).parameters if n not in ("model", "backend"))


def check_compile_arguments(inner: Any, strict: Any, inner_options: Any, torch_compile_options: dict) -> None:
    """Raise ValueError or TypeError naming an argument of :func:`realify.compile` that would fail at the first call.

    The message says what the argument accepts.
    """
    _check_inner(inner)
    if strict is not None and not isinstance(strict, bool):
        raise TypeError(f"strict={strict!r}: pass True (a complex op without a rule raises MissingRuleError), "
                        "False (it runs as an eager island) or None (realify.config.strict decides)")
    if inner_options is not None and not isinstance(inner_options, dict):
        raise TypeError(f"inner_options={inner_options!r}: pass a dict of the inner compiler's keyword "
                        "arguments (for Inductor, config keys: {'max_autotune': True})")
    _check_torch_compile_options(torch_compile_options)
    options = _options_for_inner(inner_options or {}, torch_compile_options)
    if inner == "inductor" and options:
        inductor_config(options)
    elif inner == "eager" and options:
        raise ValueError(f"inner='eager' runs the real graph without compiling it and takes no options, got "
                         f"{', '.join(map(repr, options))}: leave them out, or compile with inner='inductor'")


def _check_inner(inner: Any) -> None:
    if callable(inner):
        return
    names = _inner_names()
    accepted = (f"'inductor' (the default), 'eager' (the real graph run uncompiled), the name of a registered "
                f"dynamo backend ({', '.join(repr(n) for n in names if n not in _OWN_INNER)}; "
                "torch._dynamo.list_backends(exclude_tags=()) lists them all), or a callable "
                "(gm, example_inputs) -> callable")
    if not isinstance(inner, str):
        raise TypeError(f"inner={inner!r} is neither a compiler's name nor a callable; inner takes {accepted}")
    if inner in _OWN_INNER:
        return
    from torch._dynamo.backends.registry import lookup_backend
    from torch._dynamo.exc import InvalidBackend

    try:
        lookup_backend(inner)
    except InvalidBackend:
        known = [*_OWN_INNER, *torch._dynamo.list_backends(exclude_tags=())]
        raise ValueError(f"inner={inner!r} is not a compiler realify knows{closest(inner, known)}; inner takes "
                         f"{accepted}") from None


def _inner_names() -> list[str]:
    """Return the inner compilers a message lists.

    These are realify's own, then dynamo's (not its debugging backends, nor realify itself).
    """
    return [*_OWN_INNER, *(n for n in torch._dynamo.list_backends() if n not in (*_OWN_INNER, "realify"))]


def _check_torch_compile_options(options: dict[str, Any]) -> None:
    keywords = _torch_compile_keywords()
    for key, value in options.items():
        if key == "backend":
            raise TypeError("realify.compile sets torch.compile's backend itself: choose the compiler that "
                            "receives the real graph with inner=")
        if key not in keywords:
            raise TypeError(f"realify.compile got an unknown keyword argument {key!r}"
                            f"{closest(key, ('inner', 'strict', 'inner_options', *keywords))}; "
                            f"it takes inner, strict, inner_options and torch.compile's {', '.join(keywords)}")
        if key in _BOOLEAN_KEYWORDS and not isinstance(value, bool):
            raise TypeError(f"{key}={value!r}: pass True or False")
    dynamic = options.get("dynamic")
    if dynamic is not None and not isinstance(dynamic, bool):
        raise TypeError(f"dynamic={dynamic!r}: pass True (symbolic sizes from the start), False (static sizes) "
                        "or None (dynamo's automatic dynamic, the default)")
    if options.get("options") is not None and not isinstance(options["options"], dict):
        raise TypeError(f"options={options['options']!r}: pass a dict of Inductor config keys")


def _options_for_inner(inner_options: dict[str, Any], torch_compile_options: dict[str, Any]) -> dict[str, Any]:
    """Return the keyword arguments :func:`realify.backend.realify_backend` hands the inner compiler.

    They are ``inner_options``, and the ``mode`` and ``options`` that torch.compile passes its
    backend (it drops ``mode="default"`` and empty options, as here).
    """
    mode, options = torch_compile_options.get("mode"), torch_compile_options.get("options")
    passed = {"mode": mode} if mode and mode != "default" else {}
    return {**inner_options, **passed, **({"options": options} if options else {})}



def inductor_config(options: dict[str, Any]) -> dict[str, Any]:
    """Return the backend's keyword arguments as Inductor config patches.

    ``torch.compile(fn, backend="realify", mode=..., options=...)`` hands ``mode`` and
    ``options`` to the backend as keyword arguments; with Inductor inside they mean what they
    mean for ``torch.compile``'s default backend: ``mode`` one of Inductor's presets
    (``"max-autotune"``, ``"reduce-overhead"``, ...), ``options`` Inductor config keys. Other
    keyword arguments (``realify.compile(inner_options=...)``) are Inductor config keys too.
    An unknown mode or key raises ValueError, a value of the wrong type TypeError, each naming
    it (:func:`_check_inductor_mode`, :func:`_inductor_option_error`).
    """
    options = dict(options)
    mode = options.pop("mode", None)
    options.pop("name", None)  # torch.compile's label for the compiled region, not a config key
    keys = {**(options.pop("options", None) or {}), **options}
    _check_inductor_mode(mode)
    try:
        return torch._TorchCompileInductorWrapper(mode, keys, dynamic=None).config
    except RuntimeError as err:
        refused = _inductor_option_error(keys)
        if refused is None:
            raise
        raise refused from err


def _check_inductor_mode(mode: Any) -> None:
    if mode is None:
        return
    from torch._inductor import list_mode_options

    modes = list(list_mode_options())
    if not isinstance(mode, str):
        raise TypeError(f"mode={mode!r} is not a string: Inductor's modes are {', '.join(map(repr, modes))}")
    if mode not in modes:
        raise ValueError(f"mode={mode!r} is not one of Inductor's modes{closest(mode, modes)}: the modes are "
                         f"{', '.join(map(repr, modes))}")


def _inductor_option_error(keys: dict[str, Any]) -> Exception | None:
    """Return the error naming the one Inductor config key that torch.compile's translation refuses.

    ValueError for a key Inductor does not have (torch's own message lists all of its hundreds
    of keys), TypeError for a value of the wrong type. None where each key passes alone.
    """
    from torch._inductor import list_options

    known = list_options()
    for key, value in keys.items():
        try:
            torch._TorchCompileInductorWrapper(None, {key: value}, dynamic=None)
        except RuntimeError as err:
            if key.replace("-", "_") not in known:
                return ValueError(
                    f"{key!r} is not an Inductor config option{closest(key, known)}; inner_options (and "
                    "torch.compile's options=) take the keys of torch._inductor.config, listed by "
                    "torch._inductor.list_options()")
            return TypeError(f"Inductor config option {key!r} = {value!r} has the wrong type: {err}")
    return None
