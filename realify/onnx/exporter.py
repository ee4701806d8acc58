"""realify.onnx's entry, :func:`to_onnx`.

A complex program goes through :func:`realify.export`, the real-arithmetic forms of its LAPACK
calls, the checks of what ONNX cannot run, then ``torch.onnx.export`` with realify's
translation table, and onnxscript's optimizer.
"""

from __future__ import annotations

import copy
import logging
import os
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..engine.size_conditions import SizeConditions
from ..export import export
from ..rules._derivative import decompositions as pointwise_decompositions
from .indexing import indexing_decompositions
from .linalg import _without_error_checks, linalg_decompositions
from .refusals import _check_onnx_forms, _needs_static_sizes, _refuse_shared_inputs
from .strided import read_storage_roots
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

    Complex inputs and outputs are real ``(*shape, 2)`` tensors in the ONNX model, in the
    ``torch.view_as_real`` layout. Inputs keep the program's argument names; outputs are named
    ``output`` (one) or ``output_0``, ``output_1``, ... unless ``output_names`` says otherwise;
    dynamic dimensions take the names of their ``torch.export.Dim`` (``Dim("seq")`` is ``seq``
    in the model).

    Parameters
    ----------
    program : torch.export.ExportedProgram, torch.nn.Module or callable
        An ExportedProgram made by :func:`realify.export` (``args`` and the export options are
        then not needed), or a complex module or function, exported first with ``args``,
        ``kwargs``, ``dynamic_shapes`` and ``truncate_double``.
    args : sequence, default ()
        Example positional arguments of a module or function, as for :func:`realify.export`.
    path : str or os.PathLike, optional
        Where to save the model (an ``.onnx`` file); not saved when None.
    kwargs : dict, optional
        Example keyword arguments of a module or function.
    dynamic_shapes : optional
        The dynamic sizes, written for the complex program, as for :func:`realify.export`.
    truncate_double : bool, default False
        Carry complex128 values as float32 pairs, as for :func:`realify.export`.
    custom_translation_table : dict, optional
        Translations of the caller's own, for ``torch.onnx.export``; they take precedence over
        realify's (:func:`onnx_translation_table`).
    **onnx_options
        Other keyword arguments for ``torch.onnx.export`` (``opset_version``, default 20,
        ``output_names``, ...). ``optimize`` runs onnxscript's optimizer (True) or not (False);
        by default it runs on models of up to 2,000 nodes and only folds constants and removes
        unused nodes in larger ones, where its rewrite rules take time that grows with the
        square of the node count.

    Returns
    -------
    torch.onnx.ONNXProgram
        ``torch.onnx.export``'s program (``.model_proto``, ``.save(path)``; calling it runs the
        model in ONNX Runtime).

    Raises
    ------
    ImportError
        The ``export`` extra is missing (``pip install 'realify[export]'``: onnx, onnx_ir,
        onnxscript, onnxruntime, numpy); raised before the program is exported.
    NoOnnxFormError
        The program has an op ONNX cannot run as realify writes it (``torch.linalg.matrix_exp``,
        ``as_strided`` of a strided view, ...), or an op whose real-arithmetic form for ONNX
        (an unrolled LU, substitution or factorization) is written for one size, with a
        dynamic size there.
    MissingRuleError
        Exporting the module or function: a complex op has no rule (see :func:`realify.export`).
    RealifyError
        Exporting the module or function: what :func:`realify.export` refuses.

    See Also
    --------
    realify.export : the real-only program this exports.
    onnx_translation_table : the translations it passes to ``torch.onnx.export``.

    Examples
    --------
    >>> import os
    >>> import tempfile
    >>> import torch
    >>> import realify.onnx
    >>> def f(z):
    ...     return z * z.conj() + z
    >>> z = torch.tensor([1 + 2j, 3 - 1j])
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = os.path.join(folder, "f.onnx")
    ...     onnx_program = realify.onnx.to_onnx(f, (z,), path)
    ...     os.path.exists(path)
    True
    >>> graph = onnx_program.model_proto.graph
    >>> [x.name for x in graph.input], [y.name for y in graph.output]
    (['z'], ['output'])
    >>> onnx_program(torch.view_as_real(z))         # runs in ONNX Runtime, on (re, im) pairs
    (tensor([[ 6.,  2.],
            [13., -1.]]),)
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
    _refuse_shared_inputs(ep)
    placeholders = [n.meta.get("val") for n in ep.graph.find_nodes(op="placeholder")]
    # realify.onnx's own forms (an LU unrolled over the rows) may fix a dynamic size; torch's
    # decompositions run beside them are plain torch.onnx's, whose conditions it drops alike
    with SizeConditions(placeholders, within=("rules", "onnx/linalg.py", "onnx/indexing.py")) as conditions:
        ep = _with_inputs_apart(_without_error_checks(ep)).run_decompositions(
            {**pointwise_decompositions(), **linalg_decompositions(), **indexing_decompositions()})
    conditions.refuse(exported, _needs_static_sizes)
    read_storage_roots(ep)
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


def _with_inputs_apart(ep: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
    """``ep`` with a storage of its own for each input's example value.

    A program exported with inputs that share memory (a tensor and its ``view_as_real``,
    overlapping slices) is traced reading them as separate tensors, but keeps example values
    that share a storage, and ``run_decompositions`` fails to retrace it with them (for real
    programs too). An ONNX model's inputs are separate arrays, as the trace reads them. (One
    tensor passed twice is refused before: its trace reads both through one placeholder.) A
    new program where any shared: ``ep``, perhaps the caller's, is left as it is.
    """
    values = [n.meta.get("val") for n in ep.graph.find_nodes(op="placeholder")]
    storages = [v.untyped_storage()._cdata for v in values if isinstance(v, torch.Tensor)]
    if len(set(storages)) == len(storages):
        return ep
    gm = torch.fx.GraphModule(ep.graph_module, copy.deepcopy(ep.graph))
    fake_mode = torch._guards.detect_fake_mode(values)
    assert fake_mode is not None  # an exported program's example values are fake tensors
    seen: set[int] = set()
    for node in gm.graph.find_nodes(op="placeholder"):
        value = node.meta.get("val")
        if not isinstance(value, torch.Tensor):
            continue
        if value.untyped_storage()._cdata in seen:
            with fake_mode:
                node.meta["val"] = torch.empty_strided(value.shape, value.stride(), dtype=value.dtype,
                                                       device=value.device, requires_grad=value.requires_grad)
        seen.add(node.meta["val"].untyped_storage()._cdata)
    return ep._update(gm, ep.graph_signature)


# onnxscript's optimizer matches its rewrite rules against the whole graph for each node: its
# time grows with the square of the node count (80 s for the 2,700 nodes of a 6 x 6
# determinant's unrolled LU, against 6 s for the export itself). Above this many nodes, only
# its constant folding and dead-node removal run.
REWRITE_NODE_LIMIT = 2000


def _optimize(onnx_program: torch.onnx.ONNXProgram, optimize: bool | None) -> None:
    """Run onnxscript's optimizer on the program.

    All of it where ``optimize`` is True, or None and the model has at most
    :data:`REWRITE_NODE_LIMIT` nodes; constant folding and dead-node removal alone where None
    and larger.
    """
    import onnxscript.optimizer

    if optimize is None:
        optimize = len(onnx_program.model.graph) <= REWRITE_NODE_LIMIT
        if not optimize:
            onnxscript.optimizer.fold_constants(onnx_program.model)
            onnxscript.optimizer.remove_unused_nodes(onnx_program.model)
    if optimize:
        onnx_program.optimize()
