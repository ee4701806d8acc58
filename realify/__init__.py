"""realify: compile and export complex-valued PyTorch programs with real-only compilers."""

from __future__ import annotations

import importlib.metadata
import logging
import os

from . import backend, config, library_polyfills
from .adapter import ComplexCallAdapter
from .backend import compile, realify_backend
from .engine.decompose import decompose
from .errors import (
    ComplexLeakError,
    InputMetadataChangeError,
    MissingRuleError,
    NoOnnxFormError,
    OptionsChangedError,
    RealifyError,
    RuleConflictError,
)
from .explain import Explanation, explain
from .export import export
from .parameters import complex_parameters_as_real
from .rules._derivative import decompositions as pointwise_decompositions
from .runtime.boundary import Boundary
from .saved_programs import aoti_compile_and_package
from .tensor import ComplexTensor

logging.getLogger("realify").addHandler(logging.NullHandler())
library_polyfills.register()  # before any graph is traced: opt_einsum's calls stay in one graph


def _register_with_torch_logs() -> None:
    """Make ``TORCH_LOGS="+realify"`` configure realify's logger as it configures torch's own.

    ``torch._logging.set_logs(realify=logging.DEBUG)`` works too once the log is registered.
    torch read ``TORCH_LOGS`` when it was imported, before this log was known, so it reads it
    again where it names realify.
    """
    try:
        from torch._logging import _internal
    except ImportError:
        return
    if not hasattr(_internal, "register_log"):
        return
    _internal.register_log("realify", "realify")
    if "realify" in os.environ.get("TORCH_LOGS", ""):
        _internal._init_logs()


_register_with_torch_logs()

__all__ = [
    "Boundary",
    "ComplexCallAdapter",
    "ComplexLeakError",
    "ComplexTensor",
    "Explanation",
    "InputMetadataChangeError",
    "MissingRuleError",
    "NoOnnxFormError",
    "OptionsChangedError",
    "RealifyError",
    "RuleConflictError",
    "aoti_compile_and_package",
    "backend",
    "compile",
    "complex_parameters_as_real",
    "config",
    "decompose",
    "explain",
    "export",
    "pointwise_decompositions",
    "realify_backend",
]
try:  # the version lives in pyproject.toml; the installed package's metadata carries it
    __version__ = importlib.metadata.version("realify")
except importlib.metadata.PackageNotFoundError:  # a source tree that pip has not installed
    __version__ = "0+unknown"
