"""Optional dependencies: a missing one raises an ``ImportError`` that names the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType


def import_optional(name: str, extra: str, purpose: str) -> ModuleType:
    """The module ``name``, or an ``ImportError`` naming the pip extra that provides it.

    Parameters
    ----------
    name : str
        The module to import, e.g. ``"onnx_ir"``.
    extra : str
        The realify extra that declares it, e.g. ``"export"``.
    purpose : str
        What needs it, for the message, e.g. ``"realify.onnx.to_onnx"``.

    Returns
    -------
    ModuleType
        The imported module.

    Raises
    ------
    ImportError
        When ``name`` is not installed; the message names the extra to install.
    """
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        raise ImportError(
            f"{purpose} needs the package {err.name!r}, which is not installed: "
            f"pip install 'realify[{extra}]'"
        ) from err
