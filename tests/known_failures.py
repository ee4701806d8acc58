"""OpInfo entries (name or name.variant) that do not pass yet, per front end, with the reason.

The table tests mark these xfail(strict=True): an entry that starts passing fails the suite
until it is removed here, so this list always states exactly what does not work.

OpInfo's list of complex ops differs between torch releases (2.15 adds linalg.matrix_sqrth,
linalg.polar, nan_to_num and the dropout family, and drops cholesky and qr): an entry for an op
a release lacks parametrizes nothing there. What a release changes about an op already listed
is at the end of this file.
"""

import torch

_NO_RULE: dict[str, str] = {
    "cholesky": "no planar rule for aten.cholesky.default (a factorization/decomposition with no real-only formula yet); the compile backend runs it as an eager island",
    "geqrf": "no planar rule for aten.geqrf.default (a factorization/decomposition with no real-only formula yet); the compile backend runs it as an eager island",
    "linalg.cholesky": "no planar rule for aten.linalg_cholesky_ex.default (a factorization/decomposition with no real-only formula yet); the compile backend runs it as an eager island",
    "linalg.cholesky_ex": "no planar rule for aten.linalg_cholesky_ex.default (a factorization/decomposition with no real-only formula yet); the compile backend runs it as an eager island",
    "linalg.det": "no planar rule for aten._linalg_det.default (a factorization/decomposition with no real-only formula yet); the compile backend runs it as an eager island",
    "linalg.eig": "no planar rule for aten.linalg_eig.default (a factorization/decomposition with no real-only formula yet); the compile backend runs it as an eager island",
    "linalg.eigh": "no planar rule for aten._linalg_eigh.default (a factorization/decomposition with no real-only formula yet); the compile backend runs it as an eager island",
    "linalg.eigvals": "no planar rule for aten.linalg_eig.default (a factorization/decomposition with no real-only formula yet); the compile backend runs it as an eager island",
    "linalg.householder_product": "no planar rule for aten.linalg_householder_product.default (a factorization/decomposition with no real-only formula yet); the compile backend runs it as an eager island",
    "linalg.ldl_factor": "no planar rule for aten.linalg_ldl_factor_ex.default (a factorization/decomposition with no real-only formula yet); the compile backend runs it as an eager island",
    "linalg.ldl_factor_ex": "no planar rule for aten.linalg_ldl_factor_ex.default (a factorization/decomposition with no real-only formula yet); the compile backend runs it as an eager island",
    "linalg.ldl_solve": "no planar rule for aten.linalg_ldl_solve.default (a factorization/decomposition with no real-only formula yet); the compile backend runs it as an eager island",
    "linalg.matrix_sqrth": "no planar rule for aten.linalg_matrix_sqrth.default (a factorization/decomposition with no real-only formula yet); the compile backend runs it as an eager island",
    "linalg.lu": "no planar rule for aten.linalg_lu.default (a factorization/decomposition with no real-only formula yet); the compile backend runs it as an eager island",
    "linalg.lu_factor": "no planar rule for aten.linalg_lu_factor_ex.default (a factorization/decomposition with no real-only formula yet); the compile backend runs it as an eager island",
    "linalg.lu_factor_ex": "no planar rule for aten.linalg_lu_factor_ex.default (a factorization/decomposition with no real-only formula yet); the compile backend runs it as an eager island",
    "linalg.lu_solve": "no planar rule for aten.linalg_lu_solve.default (a factorization/decomposition with no real-only formula yet); the compile backend runs it as an eager island",
    "linalg.pinv": "no planar rule for aten.linalg_pinv.atol_rtol_tensor (a factorization/decomposition with no real-only formula yet); the compile backend runs it as an eager island",
    "linalg.pinv.hermitian": "no planar rule for aten.linalg_pinv.atol_rtol_tensor (a factorization/decomposition with no real-only formula yet); the compile backend runs it as an eager island",
    "linalg.pinv.singular": "no planar rule for aten.linalg_pinv.atol_rtol_tensor (a factorization/decomposition with no real-only formula yet); the compile backend runs it as an eager island",
    "linalg.polar": "no planar rule for aten.linalg_polar.default (a factorization/decomposition with no real-only formula yet); the compile backend runs it as an eager island",
    "linalg.qr": "no planar rule for aten.linalg_qr.default (a factorization/decomposition with no real-only formula yet); the compile backend runs it as an eager island",
    "linalg.slogdet": "no planar rule for aten._linalg_slogdet.default (a factorization/decomposition with no real-only formula yet); the compile backend runs it as an eager island",
    "linalg.svd": "no planar rule for aten._linalg_svd.default (a factorization/decomposition with no real-only formula yet); the compile backend runs it as an eager island",
    "logcumsumexp": "no planar rule for aten.logcumsumexp.default (a factorization/decomposition with no real-only formula yet); the compile backend runs it as an eager island",
    "logdet": "no planar rule for aten._linalg_slogdet.default (a factorization/decomposition with no real-only formula yet); the compile backend runs it as an eager island",
    "lu": "no planar rule for aten.linalg_lu_factor_ex.default (a factorization/decomposition with no real-only formula yet); the compile backend runs it as an eager island",
    "lu_solve": "no planar rule for aten.linalg_lu_solve.default (a factorization/decomposition with no real-only formula yet); the compile backend runs it as an eager island",
    "lu_unpack": "no planar rule for aten.lu_unpack.default (a factorization/decomposition with no real-only formula yet); the compile backend runs it as an eager island",
    "ormqr": "no planar rule for aten.ormqr.default (a factorization/decomposition with no real-only formula yet); the compile backend runs it as an eager island",
    "pca_lowrank": "no planar rule for aten.linalg_qr.default (a factorization/decomposition with no real-only formula yet); the compile backend runs it as an eager island",
    "pinverse": "no planar rule for aten.linalg_pinv.atol_rtol_tensor (a factorization/decomposition with no real-only formula yet); the compile backend runs it as an eager island",
    "qr": "no planar rule for aten.linalg_qr.default (a factorization/decomposition with no real-only formula yet); the compile backend runs it as an eager island",
    "sparse.sampled_addmm": "sparse layouts are not supported (ComplexTensor is strided only)",
    "svd": "no planar rule for aten._linalg_svd.default (a factorization/decomposition with no real-only formula yet); the compile backend runs it as an eager island",
    "svd_lowrank": "no planar rule for aten.linalg_qr.default (a factorization/decomposition with no real-only formula yet); the compile backend runs it as an eager island",
    "to_sparse": "no planar rule for aten._to_sparse.default (a factorization/decomposition with no real-only formula yet); the compile backend runs it as an eager island",
}

# eigenvalues and singular values have rules (realify/rules/spectra.py), but ATen asks for the
# vectors too whenever a gradient may be needed, always so for a tensor subclass; a traced graph
# shows that nothing reads them, an eager call does not
_VECTORS_ASKED = ("ATen asks for eigenvectors/singular vectors on a tensor subclass, and the eager front end "
                  "cannot see that nothing reads them; they have no real-only formula (realify/rules/spectra.py)")

EAGER: dict[str, str] = {
    **_NO_RULE,
    "linalg.lstsq": "no planar rule for aten.linalg_lstsq.default (a factorization/decomposition with no real-only formula yet); the compile backend runs it as an eager island",
    "linalg.lstsq.grad_oriented": "no planar rule for aten.linalg_lstsq.default (a factorization/decomposition with no real-only formula yet); the compile backend runs it as an eager island",
    "resize_": "a ComplexTensor wrapper's shape is fixed at creation: resize_ to a new shape raises a named error",
    **{op: _VECTORS_ASKED for op in ("linalg.cond", "linalg.eigvalsh", "linalg.matrix_rank",
                                     "linalg.matrix_rank.hermitian", "linalg.svdvals", "norm.nuc")},
}

DECOMPOSE: dict[str, str] = {
    **_NO_RULE,
    "allclose": "reads tensor values while tracing (aten.allclose.default): cannot be traced with fake tensors",
    "combinations": "lowers to a boolean-mask select whose size depends on values: the traced graph cannot guard on it",
    "corrcoef": "reads tensor values while tracing (aten.equal.default): cannot be traced with fake tensors",
    "cov": "reads tensor values while tracing (aten.equal.default): cannot be traced with fake tensors",
    "equal": "reads tensor values while tracing (aten.equal.default): cannot be traced with fake tensors",
    "item": "returns a Python number read from the data: cannot be traced with fake tensors",
    "linalg.lstsq": "reads tensor values while tracing (aten.linalg_lstsq.default): cannot be traced with fake tensors",
    "linalg.lstsq.grad_oriented": "reads tensor values while tracing (aten.linalg_lstsq.default): cannot be traced with fake tensors",
    "masked_select": "reads tensor values while tracing (data-dependent): cannot be traced with fake tensors",
    "narrow": "reads tensor values while tracing (data-dependent): cannot be traced with fake tensors",
    "repeat_interleave": "reads tensor values while tracing (data-dependent): cannot be traced with fake tensors",
    "tensor_split": "split indices given as a tensor are read with .tolist() while tracing: cannot be traced with fake tensors",
}

_COMPILE_NO_RULE = {
    'cholesky',
    'geqrf',
    'linalg.cholesky',
    'linalg.cholesky_ex',
    'linalg.det',
    'linalg.eig',
    'linalg.eigh',
    'linalg.eigvals',
    'linalg.householder_product',
    'linalg.ldl_factor',
    'linalg.ldl_factor_ex',
    'linalg.ldl_solve',
    'linalg.lu',
    'linalg.matrix_sqrth',
    'linalg.lu_factor',
    'linalg.lu_factor_ex',
    'linalg.lu_solve',
    'linalg.pinv',
    'linalg.pinv.hermitian',
    'linalg.pinv.singular',
    'linalg.polar',
    'linalg.qr',
    'linalg.slogdet',
    'linalg.svd',
    'logcumsumexp',
    'logdet',
    'lu',
    'lu_solve',
    'lu_unpack',
    'ormqr',
    'pinverse',
    'qr',
    'svd',
}

COMPILE: dict[str, str] = {
    **{op: "as in decompose: " + reason for op, reason in _NO_RULE.items() if op in _COMPILE_NO_RULE},
    "allclose": "dynamo graph-breaks on its data-dependent Python value, so no graph reaches the backend",
    "combinations": "as in decompose: reads tensor values while tracing (data-dependent): cannot be traced with fake tensors",
    "corrcoef": "dynamo graph-breaks on its data-dependent Python value, so no graph reaches the backend",
    "cov": "dynamo graph-breaks on its data-dependent Python value, so no graph reaches the backend",
    "equal": "dynamo graph-breaks on its data-dependent Python value, so no graph reaches the backend",
    "item": "dynamo graph-breaks on its data-dependent Python value, so no graph reaches the backend",
    "linalg.lstsq": "dynamo graph-breaks on its data-dependent Python value, so no graph reaches the backend",
    "linalg.lstsq.grad_oriented": "dynamo graph-breaks on its data-dependent Python value, so no graph reaches the backend",
    "masked_select": "as in decompose: reads tensor values while tracing (data-dependent): cannot be traced with fake tensors",
    "nn.functional.feature_alpha_dropout.without_train": "an identity in eval mode: dynamo compiles no graph",
    "pca_lowrank": "dynamo graph-breaks on its data-dependent Python value, so no graph reaches the backend",
    "resize_": "dynamo does not capture resize_ on an input: no graph reaches the backend",
    "resize_as_": "dynamo does not capture resize_ on an input: no graph reaches the backend",
    "sparse.sampled_addmm": "sparse layouts are not supported (ComplexTensor is strided only)",
    "svd_lowrank": "dynamo graph-breaks on its data-dependent Python value, so no graph reaches the backend",
    "tensor_split": "dynamo graph-breaks on its data-dependent Python value, so no graph reaches the backend",
    "to_sparse": "sparse layouts are not supported (ComplexTensor is strided only)",
}

# The compile front ends run strict (no eager islands), so an op without a rule is a
# MissingRuleError here whatever Inductor would make of its island; tests/test_islands.py
# compiles every island op with Inductor, islands allowed, and compares values and
# gradients with eager (a failure there is a failure, not an entry here).
INDUCTOR: dict[str, str] = {
    "allclose": "as with the eager inner: " + COMPILE["allclose"],
    "cholesky": "as with the eager inner: " + COMPILE["cholesky"],
    "combinations": "as with the eager inner: " + COMPILE["combinations"],
    "corrcoef": "as with the eager inner: " + COMPILE["corrcoef"],
    "cov": "as with the eager inner: " + COMPILE["cov"],
    "equal": "as with the eager inner: " + COMPILE["equal"],
    "geqrf": "as with the eager inner: " + COMPILE["geqrf"],
    "item": "as with the eager inner: " + COMPILE["item"],
    "linalg.cholesky": "as with the eager inner: " + COMPILE["linalg.cholesky"],
    "linalg.cholesky_ex": "as with the eager inner: " + COMPILE["linalg.cholesky_ex"],
    "linalg.det": "as with the eager inner: " + COMPILE["linalg.det"],
    "linalg.eig": "as with the eager inner: " + COMPILE["linalg.eig"],
    "linalg.eigh": "as with the eager inner: " + COMPILE["linalg.eigh"],
    "linalg.eigvals": "as with the eager inner: " + COMPILE["linalg.eigvals"],
    "linalg.householder_product": "as with the eager inner: " + COMPILE["linalg.householder_product"],
    "linalg.ldl_factor": "as with the eager inner: " + COMPILE["linalg.ldl_factor"],
    "linalg.ldl_factor_ex": "as with the eager inner: " + COMPILE["linalg.ldl_factor_ex"],
    "linalg.ldl_solve": "as with the eager inner: " + COMPILE["linalg.ldl_solve"],
    "linalg.lstsq": "as with the eager inner: " + COMPILE["linalg.lstsq"],
    "linalg.lstsq.grad_oriented": "as with the eager inner: " + COMPILE["linalg.lstsq.grad_oriented"],
    "linalg.lu": "as with the eager inner: " + COMPILE["linalg.lu"],
    "linalg.matrix_sqrth": "as with the eager inner: " + COMPILE["linalg.matrix_sqrth"],
    "linalg.polar": "as with the eager inner: " + COMPILE["linalg.polar"],
    "linalg.lu_factor": "as with the eager inner: " + COMPILE["linalg.lu_factor"],
    "linalg.lu_factor_ex": "as with the eager inner: " + COMPILE["linalg.lu_factor_ex"],
    "linalg.lu_solve": "as with the eager inner: " + COMPILE["linalg.lu_solve"],
    "linalg.pinv": "as with the eager inner: " + COMPILE["linalg.pinv"],
    "linalg.pinv.hermitian": "as with the eager inner: " + COMPILE["linalg.pinv.hermitian"],
    "linalg.pinv.singular": "as with the eager inner: " + COMPILE["linalg.pinv.singular"],
    "linalg.qr": "as with the eager inner: " + COMPILE["linalg.qr"],
    "linalg.slogdet": "as with the eager inner: " + COMPILE["linalg.slogdet"],
    "linalg.svd": "as with the eager inner: " + COMPILE["linalg.svd"],
    "logcumsumexp": "as with the eager inner: " + COMPILE["logcumsumexp"],
    "logdet": "as with the eager inner: " + COMPILE["logdet"],
    "lu": "as with the eager inner: " + COMPILE["lu"],
    "lu_solve": "as with the eager inner: " + COMPILE["lu_solve"],
    "lu_unpack": "as with the eager inner: " + COMPILE["lu_unpack"],
    "masked_select": "as with the eager inner: " + COMPILE["masked_select"],
    "nn.functional.feature_alpha_dropout.without_train": "as with the eager inner: " + COMPILE["nn.functional.feature_alpha_dropout.without_train"],
    "ormqr": "as with the eager inner: " + COMPILE["ormqr"],
    "pca_lowrank": "as with the eager inner: " + COMPILE["pca_lowrank"],
    "pinverse": "as with the eager inner: " + COMPILE["pinverse"],
    "qr": "as with the eager inner: " + COMPILE["qr"],
    "resize_": "as with the eager inner: " + COMPILE["resize_"],
    "resize_as_": "as with the eager inner: " + COMPILE["resize_as_"],
    "sparse.sampled_addmm": "as with the eager inner: " + COMPILE["sparse.sampled_addmm"],
    "svd": "as with the eager inner: " + COMPILE["svd"],
    "svd_lowrank": "as with the eager inner: " + COMPILE["svd_lowrank"],
    "tensor_split": "as with the eager inner: " + COMPILE["tensor_split"],
    "to_sparse": "as with the eager inner: " + COMPILE["to_sparse"],
}

# narrow's and repeat_interleave's first samples are not data-dependent: front ends that run
# only the first sample of each op (export; every front end in the compatibility run) pass them
FIRST_SAMPLE_PASSES = {"narrow", "repeat_interleave"}

# the export front end runs the first complex64 sample of each op, so those two export
EXPORT: dict[str, str] = {
    op: "as in decompose: " + reason for op, reason in DECOMPOSE.items() if op not in FIRST_SAMPLE_PASSES
}


# ---- by torch release ---------------------------------------------------------------------

if torch.torch_version.TorchVersion(torch.__version__) >= "2.15":
    # torch 2.15 traces combinations' boolean-mask select without reading values: it decomposes
    for _table in (DECOMPOSE, COMPILE, INDUCTOR, EXPORT):
        del _table["combinations"]
