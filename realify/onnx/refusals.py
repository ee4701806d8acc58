"""What realify.onnx does not write, and the checks that say so with a
:class:`~realify.errors.NoOnnxFormError` before ``torch.onnx.export`` runs: ops on pairs it has
no form for, forms written for one size used with dynamic sizes (a Cholesky factorization's
too), ``as_strided`` of a strided view, the matrix exponential."""

from __future__ import annotations

import torch

from ..errors import NoOnnxFormError
from ..runtime.aliasing import sharing_at_export

# The ops realify's rules run on pairs (realify/runtime/complex_lapack.py) that realify.onnx does
# not write, and why
NO_ONNX_FORM = {
    **dict.fromkeys(["prod_dim_int", "cumprod"],
                    "a complex product along a dynamic dim runs eager's kernel (its real form is unrolled over the "
                    "entries, in eager's order); export with that dim static"),
    "linalg_eig": "a general (non-Hermitian) eigenproblem has no practical real-arithmetic form of fixed size: "
                  "its eigenvalues are complex and its QR iteration needs shifts and deflation decided by the data; "
                  "for a Hermitian or real symmetric matrix, linalg.eigh (or eigvalsh) exports",
}


def _needs_static_sizes(conditions: str) -> NoOnnxFormError:
    return NoOnnxFormError(
        "an op of the program with dynamic sizes",
        "its real-arithmetic form for ONNX (an LU, a substitution or a factorization unrolled over the matrix's "
        "rows, a scan unrolled over a length) is written for one size, and holds only where these conditions "
        f"hold:\n{conditions}\nExport with those dims static (leading batch dims may stay dynamic)")


def _refuse_shared_inputs(ep: torch.export.ExportedProgram) -> None:
    """NoOnnxFormError where ``ep`` was exported with one tensor passed twice: torch.export's
    trace reads both through one placeholder, and an ONNX model's inputs are separate arrays,
    so its callers would pass two of which it reads one."""
    for first, other, *_ in sharing_at_export(ep):
        raise NoOnnxFormError(
            f"user inputs {first} and {other}, which were one tensor at export (passed twice)",
            "the exported trace reads both through one of them, and an ONNX model's inputs are separate arrays: "
            "the model would read one in place of the other. Export with tensors of their own (for example, a "
            ".clone() of the second)")


def _check_onnx_forms(ep: torch.export.ExportedProgram) -> None:
    """NoOnnxFormError for the first op on pairs left in ``ep`` that ONNX cannot run, and for an
    ``as_strided`` of a view with strides or an offset of its own (a part of pairs, a slice):
    ONNX tensors have no storage, and torch.onnx reads the view as if it were its own
    contiguous storage, which gives other elements than eager's, silently."""
    for node in ep.graph.find_nodes(op="call_function", target=torch.ops.aten.as_strided.default):
        source = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
        if isinstance(source, torch.Tensor) and not (source.is_contiguous() and source.storage_offset() == 0):
            raise NoOnnxFormError("torch.as_strided of a strided view (here of a complex value's part)",
                                  "ONNX tensors have no storage for its strides to address; call as_strided on a "
                                  "contiguous tensor (x.contiguous()), or index with view ops (slicing, unfold)")
    for node in ep.graph.find_nodes(op="call_function", target=torch.ops.aten.linalg_cholesky_ex.default):
        matrix = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
        if isinstance(matrix, torch.Tensor) and not isinstance(matrix.shape[-1], int):
            # its translation (realify/onnx/cholesky.py) is unrolled column by column: named here,
            # before torch.onnx would wrap the translation's error in its own
            raise NoOnnxFormError("torch.linalg.cholesky with a dynamic matrix size",
                                  "its ONNX form is unrolled column by column, for one size; export with the "
                                  "matrix dims static (leading batch dims may stay dynamic)")
    if ep.graph.find_nodes(op="call_function", target=torch.ops.aten.linalg_matrix_exp.default):
        raise NoOnnxFormError("torch.linalg.matrix_exp",
                              "torch.onnx has no form of the matrix exponential (of real matrices either; realify "
                              "computes a complex one as the real exponential of its real embedding); compute it "
                              "outside the exported program, or export a fixed-degree Taylor or Pade polynomial of "
                              "your own where the matrix norm is bounded")
    for node in ep.graph.nodes:
        name = getattr(node.target, "_opname", "")
        if node.op == "call_function" and getattr(node.target, "namespace", "") == "realify" \
                and name.endswith("_pairs"):
            base = name.removesuffix("_pairs").removesuffix("_atol_rtol_tensor")
            if base in NO_ONNX_FORM:
                raise NoOnnxFormError(f"torch.{base.lstrip('_').replace('_', '.', 1)} (realify::{name})",
                                      NO_ONNX_FORM[base])
