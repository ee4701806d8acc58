"""realify.onnx's entry, :func:`to_onnx`: a complex program through :func:`realify.export`, the
real-arithmetic forms of its LAPACK calls, the checks of what ONNX cannot run, then
``torch.onnx.export`` with realify's translation table, and onnxscript's optimizer."""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..engine.size_conditions import SizeConditions
from ..export import export
from ..rules._derivative import decompositions as pointwise_decompositions
from .linalg import _without_error_checks, linalg_decompositions
from .refusals import _check_onnx_forms, _needs_static_sizes
from .translation_table import onnx_translation_table

log = logging.getLogger("realify")

# torch.onnx's default opset in torch 2.13 (torch.onnx._constants.ONNX_DEFAULT_OPSET)
OPSET = 20


def to_onnx(
    program: torch.export.ExportedProgram | torch.nn.Module | Callable,
    args: Sequence[Any] = (),
    path: str | os.PathLike | None = None,
    *,
    kwargs: dict[str, Any] | None = None,
    dynamic_shapes: Any = None,
    truncate_double: bool = False,
    custom_translation_table: dict[Callable, Callable] | None = None,
    **onnx_options: Any,
) -> torch.onnx.ONNXProgram:
    """Export a complex program to ONNX through :func:`realify.export`.

    ``program`` is an ExportedProgram made by :func:`realify.export` (``args`` are then not
    needed), or a module/function exported first with ``args``, ``kwargs``,
    ``dynamic_shapes`` and ``truncate_double``. Complex inputs and outputs are real
    ``(*shape, 2)`` tensors in the ONNX model. The result is ``torch.onnx.export``'s
    ONNXProgram (``.model_proto``, ``.save(path)``); it is saved to ``path`` when given.
    Other keyword arguments go to ``torch.onnx.export`` (``opset_version``, ``optimize``, ...).
    Inputs keep the program's argument names; outputs are named ``output`` (one) or
    ``output_0``, ``output_1``, ... unless ``output_names`` says otherwise; dynamic dimensions
    take the names of their ``torch.export.Dim`` (``Dim("seq")`` is ``seq`` in the model).
    Needs the ``export`` extra (``pip install 'realify[export]'``): without it, an ImportError
    says so before the program is exported.
    """
    # first: the translations need numpy, onnx_ir and onnxscript (an ImportError naming the extra)
    table = {**onnx_translation_table(), **(custom_translation_table or {})}
    if isinstance(program, torch.export.ExportedProgram):
        ep = program
    else:
        ep = export(program, args, kwargs, dynamic_shapes=dynamic_shapes, truncate_double=truncate_double)
    # realify::pointwise carries a derivative formula, which ONNX has no use for: its kernel's
    # real ops go to torch.onnx instead
    exported = ep
    placeholders = [n.meta.get("val") for n in ep.graph.find_nodes(op="placeholder")]
    with SizeConditions(placeholders) as conditions:
        ep = _without_error_checks(ep).run_decompositions({**pointwise_decompositions(), **linalg_decompositions()})
    conditions.refuse(exported, _needs_static_sizes)
    _check_onnx_forms(ep)
    onnx_options.setdefault("opset_version", OPSET)
    onnx_options.setdefault("verbose", False)
    outputs = len(ep.graph_signature.user_outputs)
    onnx_options.setdefault("output_names", ["output"] if outputs == 1 else [f"output_{i}" for i in range(outputs)])
    optimize = onnx_options.pop("optimize", None)
    onnx_program = torch.onnx.export(ep, (), dynamo=True, custom_translation_table=table, optimize=False,
                                     **onnx_options)
    assert onnx_program is not None  # the dynamo exporter always returns its program
    _optimize(onnx_program, optimize)
    if dynamic_shapes is not None and not isinstance(program, torch.export.ExportedProgram):
        # the exported program knows its dynamic dims by symbol (s32); the ONNX model's
        # inputs (one per tensor input, complex ones as pairs) take the names of the Dims (one
        # Dim on several inputs is one symbol: torch warns that it names it once, as wanted)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="# The axis name")
            onnx_program._rename_dynamic_axes(dynamic_shapes)
    if path is not None:
        onnx_program.save(os.fspath(path))
        log.info("wrote %s", os.fspath(path))
    return onnx_program


# onnxscript's optimizer matches its rewrite rules against the whole graph for each node: its
# time grows with the square of the node count (80 s for the 2,700 nodes of a 6 x 6
# determinant's unrolled LU, against 6 s for the export itself). Above this many nodes, only
# its constant folding and dead-node removal run.
REWRITE_NODE_LIMIT = 2000


def _optimize(onnx_program: torch.onnx.ONNXProgram, optimize: bool | None) -> None:
    """onnxscript's optimizer on the program (``optimize`` True, or None and at most
    :data:`REWRITE_NODE_LIMIT` nodes); constant folding alone where None and larger."""
    import onnxscript.optimizer

    if optimize is None:
        optimize = len(onnx_program.model.graph) <= REWRITE_NODE_LIMIT
        if not optimize:
            onnxscript.optimizer.fold_constants(onnx_program.model)
            onnxscript.optimizer.remove_unused_nodes(onnx_program.model)
    if optimize:
        onnx_program.optimize()
