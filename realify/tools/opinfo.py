"""OpInfo runners: which ops, how to run a sample through each front end, and how to compare
with eager complex PyTorch. Used by the table tests and by ``python -m realify coverage``.
Needs the ``coverage`` extra: PyTorch's OpInfo table (``torch.testing._internal``) imports
numpy and expecttest, which torch itself does not require."""

from __future__ import annotations

import cmath
import contextlib
import functools
import math
import operator
import unittest.mock
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

from realify import ComplexTensor
from realify._optional import import_optional
from realify.tensor import unwrap_complex, wrap_complex

# a missing numpy or expecttest raises an ImportError that names the "coverage" extra
op_db = import_optional("torch.testing._internal.common_methods_invocations", "coverage",
                        "PyTorch's OpInfo table (realify.tools.opinfo, python -m realify coverage)").op_db

MAX_SAMPLES = 4
DTYPES = (torch.complex64, torch.complex128)

# ops whose values are random or uninitialized: only metadata is compared
NONDETERMINISTIC = {
    "empty", "empty_like", "empty_permuted", "empty_strided", "new_empty", "new_empty_strided",
    "rand_like", "randn_like", "randn", "normal", "normal.in_place", "uniform", "bernoulli",
    "nn.functional.feature_alpha_dropout", "pca_lowrank", "svd_lowrank",
    # torch >= 2.15 lists the dropout family for complex inputs; a compiled program draws its
    # mask from its own random stream (as torch.compile's default does)
    "nn.functional.dropout", "nn.functional.dropout2d", "nn.functional.dropout3d",
    "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout.with_train",
}


def op_id(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


@functools.cache
def complex_ops() -> list:
    """Every OpInfo entry that supports complex64 on CPU (the denominator of coverage)."""
    return [op for op in op_db if torch.complex64 in op.supported_dtypes("cpu")]


def samples(op, dtype) -> list:
    torch.manual_seed(0)
    out = []
    with no_test_case_lookup():
        for sample in op.sample_inputs("cpu", dtype, requires_grad=False):
            out.append(sample)
            if len(out) >= MAX_SAMPLES:
                break
    return out


@contextlib.contextmanager
def no_test_case_lookup():
    """OpInfo's sample generators look for the unittest.TestCase that runs them
    (``extract_test_fn``: ``inspect.stack()``, which reads the source of every frame, a third
    of the table tests' time). Outside a TestCase (pytest functions, ``realify coverage``) the
    lookup finds nothing, and its answer, None, is given straight away; the samples (seeded
    alike when no test is found) are the same."""
    from torch.testing._internal import common_utils
    from torch.testing._internal.opinfo import core

    with contextlib.ExitStack() as patches:
        for module in (common_utils, core):
            if hasattr(module, "extract_test_fn"):  # a release without the lookup needs nothing
                patches.enter_context(unittest.mock.patch.object(module, "extract_test_fn", lambda: None))
        yield


def call_sample(op, sample) -> Any:
    return op(sample.input, *sample.args, **sample.kwargs)


def flatten_sample(sample) -> tuple[list[torch.Tensor], Callable[[list[torch.Tensor]], Any]]:
    """The sample's tensors as a flat list, and a function rebuilding the call from them."""
    leaves, spec = tree_flatten((sample.input, sample.args, sample.kwargs))
    tensor_at = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]

    def rebuild(tensors):
        new = list(leaves)
        for i, t in zip(tensor_at, tensors):
            new[i] = t
        return tree_unflatten(new, spec)

    return [leaves[i] for i in tensor_at], rebuild


def sample_program(op, sample, target: Callable | None = None) -> tuple[list[torch.Tensor], Callable]:
    """The sample's tensors, and a program of those tensors that calls ``target`` (the OpInfo
    entry by default) with the sample's arguments."""
    tensors, rebuild = flatten_sample(sample)
    target = op if target is None else target

    def program(*ts):
        inp, args, kwargs = rebuild(list(ts))
        return target(inp, *args, **kwargs)

    return tensors, program


def run_eager_complex_tensor(op, sample) -> Any:
    """Front end (a): ComplexTensor in, ops dispatched through the rule table."""
    inp, args, kwargs = wrap_complex((sample.input, sample.args, sample.kwargs))
    return unwrap_complex(op(inp, *args, **kwargs))


def run_decompose(op, sample) -> Any:
    """Front end (b): trace with realify.decompose, check the graph is real, run it."""
    import realify

    tensors, program = sample_program(op, sample)
    gm = realify.decompose(program, tensors)
    out = gm(*tensors)
    return tree_unflatten(out, gm.realify_signature.out_spec)


def _direct_callable(op) -> Callable:
    """The torch function behind an OpInfo entry of a random op. OpInfo wraps those in
    wrapper_set_seed (torch.manual_seed), which dynamo runs eagerly: compiling the wrapper
    would send no graph to the backend. Their values are not compared anyway."""
    module, _, name = f"torch.{op.name}".rpartition(".")  # nn.functional.dropout: torch.nn.functional
    candidates = [(torch.Tensor, name + "_")]
    if op.variant_test_name != "in_place":
        owner = operator.attrgetter(module[len("torch."):])(torch) if module != "torch" else torch
        candidates = [(owner, name), (torch.Tensor, name), *candidates]
    for owner, attr in candidates:
        fn = getattr(owner, attr, None)
        if callable(fn):
            return fn
    return op


class NoGraphCaptured(AssertionError):
    """Dynamo handed no graph to the backend (it graph-broke, or captured no op) and ran the
    sample itself: realify compiled nothing. The table tests skip such a run."""


def run_compile(op, sample, inner: Any = "eager") -> Any:
    """Front end (c): torch.compile with the realify backend (strict: no eager islands). Raises
    NoGraphCaptured when no graph reached the backend."""
    import realify

    tensors, program = sample_program(op, sample, _direct_callable(op) if op_id(op) in NONDETERMINISTIC else op)
    compiled_graphs = []

    def backend(gm, example_inputs):
        compiled_graphs.append(gm)
        return realify.realify_backend(gm, example_inputs, inner=inner, strict=True)

    torch._dynamo.reset()
    try:
        # let dynamo capture ops with data-dependent output shapes (nonzero) instead of breaking
        with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
            out = torch.compile(program, backend=backend, dynamic=False)(*tensors)
    finally:
        torch._dynamo.reset()
    if not compiled_graphs:
        raise NoGraphCaptured("dynamo captured no graph for this op, so nothing was compiled")
    return out


def run_inductor(op, sample) -> Any:
    return run_compile(op, sample, inner="inductor")


def run_export(op, sample) -> Any:
    """Front end (d): realify.export (checks that the ExportedProgram is real-only), then the
    program called through ComplexCallAdapter: complex inputs in as view_as_real, the real
    module run, complex outputs back as view_as_complex."""
    import realify

    tensors, program = sample_program(op, sample)
    ep = realify.export(program, tensors)
    return realify.ComplexCallAdapter(ep)(*tensors)


# Complex matrix products run as 3 real GEMMs by default (Gauss). Their error bound is
# gamma_{n+4} (M1 + M2 + M3) with M3 = |Ar + Ai| |Br + Bi| <= 2 (M1 + M2), against
# gamma_{n+1} (M1 + M2) for the 4-GEMM form eager uses (docs/numerics.md): up to 3x larger on
# samples with heavy cancellation, so complex64 GEMM ops get 3x the elementwise rtol.
GEMM_OPS = {"mm", "bmm", "addmm", "addmm.decomposed", "baddbmm", "addbmm", "matmul", "__rmatmul__", "einsum",
            "tensordot", "inner", "linalg.multi_dot", "nn.functional.linear", "kron"}


def _tolerance(dtype: torch.dtype) -> dict:
    # complex64: a few ulps of float32 accumulated over short chains of real ops;
    # complex128: the same relative bound scaled to float64.
    if dtype in (torch.complex128, torch.float64):
        return dict(rtol=1e-7, atol=1e-7)
    return dict(rtol=1.3e-5, atol=1e-5)


def assert_matches(actual: Any, expected: Any, *, metadata_only: bool = False, dtype=torch.complex64,
                   gemm: bool = False) -> None:
    a_leaves, _a_spec = tree_flatten(actual)
    e_leaves, _e_spec = tree_flatten(expected)
    assert len(a_leaves) == len(e_leaves), f"{len(a_leaves)} outputs, expected {len(e_leaves)}"
    for a, e in zip(a_leaves, e_leaves):
        if isinstance(e, torch.Tensor):
            assert isinstance(a, torch.Tensor), f"expected a tensor, got {type(a).__name__}"
            assert not isinstance(a, ComplexTensor), "a ComplexTensor leaked out"
            assert a.dtype == e.dtype, f"dtype {a.dtype}, expected {e.dtype}"
            assert a.shape == e.shape, f"shape {tuple(a.shape)}, expected {tuple(e.shape)}"
            if metadata_only:
                continue
            a_c = a.resolve_conj().resolve_neg()
            e_c = e.resolve_conj().resolve_neg()
            if e.dtype == torch.bool or not (e.dtype.is_floating_point or e.dtype.is_complex):
                assert torch.equal(a_c, e_c), "integer/bool values differ"
            else:
                tol = _tolerance(e.dtype)
                if gemm and e.dtype in (torch.complex64, torch.float32):
                    tol = dict(rtol=3 * tol["rtol"], atol=3 * tol["atol"])
                torch.testing.assert_close(a_c, e_c, equal_nan=True, **tol)
        elif not metadata_only:
            if isinstance(e, float) and math.isnan(e):
                assert cmath.isnan(a)
            else:
                assert a == e or abs(complex(a) - complex(e)) <= 1e-5 * max(1.0, abs(complex(e))), f"{a} != {e}"
