"""OpInfo entries (name or name.variant) that do not pass yet, per front end, with the reason.

Each reason is stated once, by a named category below: one reason (a template that may name the
aten op an entry stops at), the front ends it applies to, and its ops, each listed once. The
per-front-end tables EAGER, DECOMPOSE, COMPILE, INDUCTOR and EXPORT are computed from the
categories, and the table tests (tests/test_opinfo.py) mark their entries xfail(strict=True): an
entry that starts passing fails the suite until it is removed here, so the tables always state
exactly what does not work. Giving an op a rule means deleting it from its category, one place.

NO_GRAPH is not a table of failures: it names the ops whose compile-front-end runs hand no graph
to realify's backend at all (dynamo graph-breaks and runs them itself), and why.
tests/test_opinfo.py detects a run that handed no graph and skips it, with the reason given
here; an op listed there whose runs all do hand a graph fails the test.

OpInfo's list of complex ops differs between torch releases (2.15 adds linalg.matrix_sqrth,
linalg.polar, nan_to_num and the dropout family, and drops cholesky and qr): an entry for an op
a release lacks parametrizes nothing there. What a release changes about an op already listed
is at the end of this file.
"""

from __future__ import annotations

import dataclasses

EAGER_FE, DECOMPOSE_FE, COMPILE_FE = "eager", "decompose", "compile"
_ALL = frozenset({EAGER_FE, DECOMPOSE_FE, COMPILE_FE})


@dataclasses.dataclass(frozen=True)
class Category:
    """OpInfo entries that fail for one reason on the front ends named. ``ops`` maps each entry
    to what ``{}`` in ``reason`` stands for (the aten op it stops at), or to "" when the
    reason names nothing."""

    reason: str
    front_ends: frozenset[str]
    ops: dict[str, str]

    def reasons(self) -> dict[str, str]:
        return {op: self.reason.format(detail) for op, detail in self.ops.items()}


def _same(*ops: str) -> dict[str, str]:
    return dict.fromkeys(ops, "")


# ---- not supported (the eager front ends) ----------------------------------------------

# (a) under torch.compile dynamo itself does not trace sparse tensors: see NO_GRAPH
SPARSE = Category(
    "sparse layouts are not supported (ComplexTensor is strided only)",
    frozenset({EAGER_FE, DECOMPOSE_FE}),
    _same("sparse.sampled_addmm", "to_sparse"),
)

# ---- traced front ends -------------------------------------------------------------------

# (b) under torch.compile most of these hand no graph to the backend (NO_GRAPH): those that do
# fail as in decompose
DATA_DEPENDENT = Category(
    "reads tensor values while tracing ({}): cannot be traced with fake tensors",
    frozenset({DECOMPOSE_FE, COMPILE_FE}),
    {
        "allclose": "aten.allclose.default returns a bool",
        "corrcoef": "aten.equal.default returns a bool",
        "cov": "aten.equal.default returns a bool",
        "equal": "aten.equal.default returns a bool",
        "item": "it returns a Python number read from the data",
        "linalg.lstsq": "aten.linalg_lstsq.default: its output shapes depend on values",
        "linalg.lstsq.grad_oriented": "aten.linalg_lstsq.default: its output shapes depend on values",
    },
)


# ---- eager front end only ------------------------------------------------------------------

FIXED_SHAPE = Category(
    "a ComplexTensor wrapper's shape is fixed at creation: resize_ to a new shape raises a named error",
    frozenset({EAGER_FE}),
    _same("resize_"),
)

# ---- the test harness --------------------------------------------------------------------

# (c) for the compile front ends (compile, inductor). realify.tools.opinfo.run_compile raises
# NoGraphCaptured when a sample's run hands no graph to the backend; the test skips such a run
# with the reason here, and fails when an op listed here handed a graph for every sample it ran
# (tensor_split's first sample hands none, its second does). An op listed here has no entry
# in COMPILE: what its other categories say is never reached there.
NO_GRAPH: dict[str, str] = {
    "allclose": "aten.allclose.default returns a bool read from the data: dynamo graph-breaks on it",
    "corrcoef": "aten.equal.default returns a bool read from the data: dynamo graph-breaks on it",
    "cov": "aten.equal.default returns a bool read from the data: dynamo graph-breaks on it",
    "equal": "aten.equal.default returns a bool read from the data: dynamo graph-breaks on it",
    "item": "OpInfo calls Tensor.item through its seeding wrapper (wrapper_set_seed), which dynamo does not trace",
    "linalg.lstsq": "aten.linalg_lstsq.default has no meta kernel for its value-dependent output shapes: "
                    "dynamo graph-breaks on it",
    "linalg.lstsq.grad_oriented": "aten.linalg_lstsq.default has no meta kernel for its value-dependent output "
                                  "shapes: dynamo graph-breaks on it",
    "nn.functional.feature_alpha_dropout.without_train": "OpInfo calls it through its seeding wrapper "
                                                         "(wrapper_set_seed), which dynamo does not trace",
    "resize_": "dynamo does not trace Tensor.resize_",
    "resize_as_": "dynamo does not trace torch.resize_as_ (a builtin it skips)",
    "sparse.sampled_addmm": "torch.compile does not support sparse tensors: dynamo graph-breaks on the sparse input",
    "tensor_split": "split indices given as a tensor are read with .tolist(): dynamo graph-breaks on "
                    "aten._local_scalar_dense.default",
    "to_sparse": "torch.compile does not support sparse tensors: dynamo graph-breaks on the sparse output",
}

# OpInfo's lambda for these multiplies two factors (a @ b.mT) before calling torch.pca_lowrank /
# torch.svd_lowrank; realify.tools.opinfo._direct_callable (which avoids OpInfo's seeding wrapper)
# calls the torch function itself with the sample's arguments, so b lands on q
HARNESS_CALL = Category(
    "the harness calls torch.{0} with OpInfo's two factors as arguments (realify.tools.opinfo._direct_callable): "
    "TypeError ({0}() got multiple values for argument 'q'), and no graph reaches the backend",
    frozenset({COMPILE_FE}),
    {"pca_lowrank": "pca_lowrank", "svd_lowrank": "svd_lowrank"},
)

# ---- the tables ------------------------------------------------------------------------------

# Where an op is in two categories on one front end, the earlier category's failure is the one
# a run meets first (the harness call before tracing, tracing before the missing rule)
CATEGORIES = (HARNESS_CALL, DATA_DEPENDENT, SPARSE,
              FIXED_SHAPE)


def _table(front_end: str, leave_out=frozenset()) -> dict[str, str]:
    table: dict[str, str] = {}
    for category in CATEGORIES:
        if front_end in category.front_ends:
            for op, reason in category.reasons().items():
                if op not in leave_out:
                    table.setdefault(op, reason)
    return dict(sorted(table.items()))


EAGER = _table(EAGER_FE)
DECOMPOSE = _table(DECOMPOSE_FE)
# The compile front ends run strict (no eager islands), so an op without a rule is a
# MissingRuleError here whatever Inductor would make of its island; tests/test_islands.py
# compiles every island op with Inductor, islands allowed, and compares values and
# gradients with eager (a failure there is a failure, not an entry here).
COMPILE = _table(COMPILE_FE, leave_out=NO_GRAPH.keys())
# Inductor compiles what the eager inner compiles: the same failures
INDUCTOR = dict(COMPILE)
# the export front end runs the first complex64 sample of each op
EXPORT = dict(DECOMPOSE)


# ---- sizes that turn symbolic (tests/test_symbolic_sizes.py) -------------------------------

# front end (shapes, dynamic, export, and onnx: export's ONNX Runtime run) -> entry -> why it fails there
SIZES: dict[str, dict[str, str]] = {
    "shapes": {},
    "dynamic": {},
    "export": {
        "resize_": "resize_ of an input with symbolic sizes: torch's functionalization of resize_ calls "
                   "storage_offset() of a symbolic tensor, and plain torch.export's run_decompositions() raises "
                   "the same error on this program (docs/limits.md)",
    },
    # the ONNX Runtime run of the same exports (every sixteenth entry; none in the compatibility
    # run): torch.onnx's and ONNX Runtime's own gaps, which plain torch.onnx's model of the real
    # op (the entry's float32 sample, every dim Dim.AUTO) shows alike (docs/limits.md)
    "onnx": {
        **dict.fromkeys(["chunk", "unsafe_chunk"],
                        "onnxscript's constant folding fails on the SplitToSequence torch.onnx writes for a chunk "
                        "of a dynamic size (plain torch.onnx: the same PassError)"),
        "diagonal_scatter": "torch.onnx's decomposition of diagonal_scatter leaves an in-place prims.copy_to, which "
                            "its own functional check refuses (plain torch.onnx: the same ConversionError)",
        **dict.fromkeys(["uniform", "rand_like"],
                        "torch.onnx has no translation for prims.uniform (plain torch.onnx: the same ConversionError)"),
        "bfloat16": "the test's runner passes tensors to ONNX Runtime as numpy arrays, and numpy has no bfloat16",
        "lu_unpack": "torch.onnx has no translation for aten.lu_unpack (plain torch.onnx: the same ConversionError)",
        "as_strided_scatter": "torch.onnx has no translation for prims.as_strided_scatter (plain torch.onnx: the same "
                              "ConversionError)",
        "float_power": "float_power computes in complex128, whose log reaches atan2 of float64 parts: ONNX Runtime "
                       "has no float64 Atan kernel (docs/export.md, Limits)",
        "nn.functional.pad.replicate_negative": "ONNX Runtime's Pad refuses replicate padding that leaves an input "
                                                "extent of 0 (plain torch.onnx's model: the same error)",
    },
}

# entries whose compile runs at symbolic sizes hand dynamo's graph to no backend, beyond NO_GRAPH
SIZES_NO_GRAPH: dict[str, str] = {}

# entries whose export with every dim dynamic is refused by name, and why: by realify.export
# (torch.export's constraint violation) or by realify.onnx (NoOnnxFormError, or the named
# NotImplementedError of eigh's and the SVD's forms); a refusal of an entry not listed here
# fails, and so does a listed entry that is not refused where its stage runs
_UNROLLED = "its ONNX form ({}) is unrolled over the matrix size, which is dynamic here"
REFUSED: dict[str, dict[str, str]] = {
    "export": {
        "cross": "torch.cross without dim takes the first dim of size 3: the rule tests each dynamic size against 3 "
                 "(plain torch.export keeps the dim with a run-time guard != 3, which fails at 3)",
    },
    "onnx": {
        **dict.fromkeys(["lu_solve", "linalg.lu_solve", "linalg.solve_ex", "triangular_solve", "lu",
                         "linalg.lu", "linalg.lu_factor", "linalg.lu_factor_ex", "linalg.inv", "linalg.inv_ex",
                         "linalg.solve", "linalg.solve_triangular", "linalg.tensorinv", "linalg.tensorsolve",
                         "logdet", "linalg.det", "linalg.slogdet"],
                        _UNROLLED.format("LU and substitutions")),
        **dict.fromkeys(["linalg.qr", "ormqr", "linalg.householder_product"],
                        _UNROLLED.format("Householder reflections")),
        **dict.fromkeys(["linalg.ldl_solve", "linalg.ldl_factor", "linalg.ldl_factor_ex"],
                        _UNROLLED.format("Bunch-Kaufman")),
        **dict.fromkeys(["linalg.cholesky", "linalg.cholesky_ex"], _UNROLLED.format("Cholesky, column by column")),
        **dict.fromkeys(["cholesky_solve", "cholesky_inverse"], _UNROLLED.format("substitutions with the factor")),
        **dict.fromkeys(["svd_lowrank", "pca_lowrank", "linalg.svdvals", "linalg.pinv", "linalg.pinv.singular",
                         "pinverse", "linalg.cond", "norm.nuc", "linalg.polar", "linalg.matrix_rank"],
                        _UNROLLED.format("Jacobi sweeps of the SVD")),
        **dict.fromkeys(["linalg.matrix_sqrth", "linalg.eigvalsh", "linalg.eigh", "linalg.matrix_rank.hermitian",
                         "linalg.pinv.hermitian"], _UNROLLED.format("Jacobi sweeps of eigh")),
        **dict.fromkeys(["prod", "cumprod", "masked.cumprod", "linalg.vander"],
                        "a complex product along a dynamic dim: its real form is unrolled over the entries, in "
                        "eager's order"),
        "logcumsumexp": _UNROLLED.format("a scan of log2(n) rounds").replace("matrix size", "length"),
        **dict.fromkeys(["linalg.eig", "linalg.eigvals"],
                        "a general eigenproblem has no real-arithmetic ONNX form at any size (its QR iteration's "
                        "shifts and deflation are decided by the data)"),
        "as_strided.partial_views": "as_strided of a strided view (a part of the pairs) has no ONNX form: ONNX "
                                    "tensors have no storage for its strides",
        "matrix_exp": "torch.onnx has no form of the matrix exponential, of real matrices either (realify.onnx "
                      "names torch.linalg.matrix_exp rather than torch.onnx's DispatchError)",
    },
}
