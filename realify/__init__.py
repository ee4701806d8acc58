"""realify: compile and export complex-valued PyTorch programs with real-only compilers."""

from __future__ import annotations

import logging

from . import backend, config
from .backend import compile, realify_backend
from .boundary import Boundary
from .decompose import decompose
from .errors import ComplexLeakError, MissingRuleError, RealifyError, RuleConflictError
from .export import ComplexCallAdapter, export
from .rules._derivative import decompositions as pointwise_decompositions
from .tensor import ComplexTensor

logging.getLogger("realify").addHandler(logging.NullHandler())

__all__ = [
    "Boundary",
    "ComplexCallAdapter",
    "ComplexTensor",
    "ComplexLeakError",
    "MissingRuleError",
    "RealifyError",
    "RuleConflictError",
    "backend",
    "compile",
    "realify_backend",
    "config",
    "decompose",
    "export",
    "pointwise_decompositions",
]
__version__ = "0.1.0"
