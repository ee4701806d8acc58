"""The rule families: the package's public modules, each registering its rules on import.

Its own module so that both the table (realify/rules/_registry.py) and the custom op that
carries the derivative formulas (realify/rules/_derivative.py), which may run in a graph before
any rule was looked up, load them without importing each other."""

from __future__ import annotations

import functools
import importlib
import pkgutil

PACKAGE = __name__.rpartition(".")[0]  # realify.rules


@functools.cache
def load_families() -> None:
    """Import every rule family once (each module registers its rules on import)."""
    for module in pkgutil.iter_modules(importlib.import_module(PACKAGE).__path__):
        if not module.name.startswith("_"):
            importlib.import_module(f"{PACKAGE}.{module.name}")
