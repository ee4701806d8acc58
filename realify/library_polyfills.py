"""Traceable stand-ins for the few library functions that break dynamo's graphs in models
people run, where the function's work is bookkeeping around plain tensor code.

opt_einsum (what tensorly's ``use_opt_einsum`` plugin, and so every neuraloperator model,
contracts with) asks three questions on each call that dynamo cannot trace: which library
a tensor belongs to (an ``lru_cache``), which module holds that library's ``tensordot``
(``importlib.import_module``) and whether this thread shares intermediates
(``threading.get_ident``). Each is a graph break, and a graph break between a transform and
its readers is a complex value crossing the boundary whole (docs/architecture.md, "Graph
breaks in the libraries people use"). The stand-ins answer the same questions with code dynamo traces, for the cases
whose answer is fixed while a graph runs, and call the original's own code otherwise (which
breaks the graph as before): what a call computes never changes.

Registered once, when realify is imported, through ``torch._dynamo.substitute_in_graph``:
dynamo uses them for every backend in the process, not realify's alone (there is no
unregistering), which is why each must return exactly what the original returns.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import sys
import types
from collections.abc import Callable
from typing import Any

import torch

log = logging.getLogger("realify")


def _copy(fn: Callable) -> Callable:
    """The same function under another identity: what a stand-in calls for the cases it does
    not cover (dynamo looks stand-ins up by identity, so calling ``fn`` would call the
    stand-in again)."""
    copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    return copy


# opt_einsum's modules and copies of its originals, set by _opt_einsum(): the stand-ins read
# them as globals, which dynamo can guard on
_oe: dict[str, Any] = {}


def _infer_backend(x: Any) -> str:
    # the top-level package of the array's class, as the original, without its lru_cache
    return x.__class__.__module__.split(".")[0]


def _import_func(func: str, backend: str, default: Any = None) -> Any:
    # "torch" is an alias of opt_einsum's own torch module (dispatch._aliases); a function
    # it lacks, with no default, goes to the original for the library's own error message
    module = _oe["torch_backend"]
    if backend == "torch" and (default is not None or hasattr(module, func)):
        return getattr(module, func, default)
    return _oe["import_func"](func, backend, default)


def _currently_sharing() -> bool:
    # no thread shares a cache: then neither does this one
    if not _oe["sharing"]._SHARING_STACK:
        return False
    return _oe["currently_sharing"]()


def _opt_einsum() -> None:
    contract = importlib.import_module("opt_einsum.contract")
    dispatch = importlib.import_module("opt_einsum.backends.dispatch")
    sharing = importlib.import_module("opt_einsum.sharing")
    torch_backend = importlib.import_module("opt_einsum.backends.torch")
    if dispatch._aliases.get("torch") != torch_backend.__name__:
        raise ImportError(f"opt_einsum's torch backend is not {torch_backend.__name__}")
    _oe.update(sharing=sharing, torch_backend=torch_backend, import_func=_copy(dispatch._import_func),
               currently_sharing=_copy(sharing.currently_sharing))
    torch._dynamo.substitute_in_graph(contract.infer_backend)(_infer_backend)
    torch._dynamo.substitute_in_graph(dispatch._import_func)(_import_func)
    torch._dynamo.substitute_in_graph(sharing.currently_sharing)(_currently_sharing)


_REGISTERED: list[str] = []


def register() -> list[str]:
    """Register the stand-ins for each library already imported (torch imports opt_einsum
    itself when it is installed) or importable; returns the libraries covered."""
    if _REGISTERED:
        return _REGISTERED
    for name, install in [("opt_einsum", _opt_einsum)]:
        if name not in sys.modules and importlib.util.find_spec(name) is None:
            continue
        try:
            install()
        except (AttributeError, ImportError, TypeError, ValueError) as e:
            # a release laid out otherwise, or stand-ins registered already: the library
            # runs as it is, its calls break graphs as they would without realify
            log.debug("no stand-ins for %s: %s", name, e)
            continue
        _REGISTERED.append(name)
    return _REGISTERED
