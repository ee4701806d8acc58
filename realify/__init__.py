"""realify: compile and export complex-valued PyTorch programs with real-only compilers."""

from __future__ import annotations

import logging

from . import backend, config
from .backend import compile, realify_backend
from .boundary import Boundary
from .decompose import decompose
from .errors import ComplexLeakError, MissingRuleError, OptionsChangedError, RealifyError, RuleConflictError
from .explain import Explanation, explain
from .export import ComplexCallAdapter, export
from .parameters import complex_parameters_as_real
from .rules._derivative import decompositions as pointwise_decompositions
from .tensor import ComplexTensor

logging.getLogger("realify").addHandler(logging.NullHandler())

__all__ = [
    "Boundary",
    "ComplexCallAdapter",
    "ComplexTensor",
    "ComplexLeakError",
    "Explanation",
    "OptionsChangedError",
    "MissingRuleError",
    "RealifyError",
    "RuleConflictError",
    "backend",
    "compile",
    "complex_parameters_as_real",
    "realify_backend",
    "config",
    "decompose",
    "explain",
    "export",
    "pointwise_decompositions",
]
__version__ = "0.1.0"
