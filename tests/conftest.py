import os
import sys
import warnings

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
warnings.filterwarnings("ignore", message="Casting complex values to real discards")

pytest_plugins = ["front_end_report"]


@pytest.fixture(autouse=True, scope="session")
def _gemm_timings_in_a_temporary_cache(tmp_path_factory):
    """Timings of complex GEMM forms (realify/passes/gemm_form.py) go to a directory of the
    test session, never to the user's cache (subprocesses inherit it)."""
    saved = os.environ.get("REALIFY_CACHE_DIR")
    os.environ["REALIFY_CACHE_DIR"] = str(tmp_path_factory.mktemp("realify-cache"))
    yield
    if saved is None:
        os.environ.pop("REALIFY_CACHE_DIR", None)
    else:
        os.environ["REALIFY_CACHE_DIR"] = saved


@pytest.fixture(autouse=True)
def _gemm_forms_by_threshold(request):
    """The threshold rule picks complex GEMM forms in every test: measured choices follow the
    machine's noise, and tests assert graphs. A test opts into measurement by patching
    ``realify.config.gemm_form`` itself (tests/test_gemm_form.py); the docstrings' examples
    (tests/test_docstrings.py) see the defaults they document."""
    if request.module.__name__ == "test_docstrings":
        yield
        return
    import realify

    with realify.config.patch(gemm_form="threshold"):
        yield


@pytest.fixture
def fresh_dynamo():
    """Dynamo's caches emptied before and after the test (each test compiles from scratch and
    leaves no compiled code behind), and a fixed seed."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    yield
    torch._dynamo.reset()


# The compatibility run on the other supported torch releases (make test-compat) keeps the CI
# within its time budget: the OpInfo table's first sample per op (tests/test_opinfo.py) and
# the modules below, which run every front end and every Inductor integration realify has
# (its passes, lowerings, islands, signed zeros) on small programs. The default pin runs all.
COMPAT_RUN_MODULES = {
    "test_aliasing", "test_autograd_semantics", "test_autocast", "test_backend", "test_centered_fft", "test_core",
    "test_dynamic", "test_eigen", "test_errors", "test_export", "test_factorizations", "test_fuzz", "test_gradients",
    "test_islands", "test_jacobi", "test_layout", "test_lu", "test_opinfo", "test_pooling", "test_products",
    "test_special_products", "test_spectral", "test_symbolic_sizes",
}
COMPAT_RUN_TESTS = {
    # the Inductor signed-zero and special-value table, complex64 (found 2.15's x + 0 folding)
    "tests/test_numerics.py::test_special_values_compiled_by_inductor[complex64]",
    # the SVD's export (Jacobi's scan on the embedding, Householder) through this release's torch.onnx
    "tests/test_singular.py::test_onnx_runtime_pinv_of_rank_deficient_matrix",
    "tests/test_bunch_kaufman.py::test_onnx_runtime_runs_the_exported_program",
    # complex logcumsumexp: eager's kernel on pairs under Inductor (values, first derivative);
    # its ONNX form is elementwise ops and concatenations, which the exports above cover
    "tests/test_logcumsumexp.py::test_under_inductor",
}
COMPAT_RUN_LEAVES_OUT = {  # test functions, every parametrization
    # 12 functions forward and backward, minutes: test_sin_gradient_on_the_real_axis_compiled
    # compiles the same derivative-formula path
    "tests/test_gradients.py::test_compiled_gradients_match_eager_at_special_points",
    # every autograd construct under Inductor, minutes: the eager inner compiler's run of the
    # same programs covers the tracing that differs between releases
    "tests/test_autograd_semantics.py::test_gradients_match_eager_under_inductor",
    # accuracy sweeps of realify's own real arithmetic (30 s): the same ops on every release;
    # the exports they go through are covered by the ONNX Runtime tests beside them
    "tests/test_lu.py::test_onnx_runtime_solve_accuracy",
    "tests/test_jacobi.py::test_values_and_vectors_against_lapack",
}


def _in_compat_run(item) -> bool:
    module = item.nodeid.split("::")[0].rsplit("/", 1)[-1].removesuffix(".py")
    function = item.nodeid.split("[")[0]
    return (module in COMPAT_RUN_MODULES and function not in COMPAT_RUN_LEAVES_OUT) or item.nodeid in COMPAT_RUN_TESTS


# Of a parametrized test in the compatibility run, every sixth parametrization (their order is
# the tables' own: neighbours differ in one parameter): a release differs from another in
# tracing and Inductor, which a sixth of the cases of a table reach as well as all of them.
# The tables that choose their own compatibility subset are left whole.
COMPAT_RUN_WHOLE_TABLES = {"test_opinfo", "test_symbolic_sizes", "test_fuzz"}
COMPAT_RUN_STRIDE = 6


def _strided(items: list) -> list:
    seen: dict[str, int] = {}
    kept = []
    for item in items:
        module = item.nodeid.split("::")[0].rsplit("/", 1)[-1].removesuffix(".py")
        if getattr(item, "callspec", None) is None or module in COMPAT_RUN_WHOLE_TABLES \
                or item.nodeid in COMPAT_RUN_TESTS:
            kept.append(item)
            continue
        function = item.nodeid.split("[")[0]
        index = seen[function] = seen.get(function, -1) + 1
        if index % COMPAT_RUN_STRIDE == 0:
            kept.append(item)
    return kept


# The default suite's share of its slowest tables. Each case below exports an unrolled
# linear-algebra form to ONNX Runtime, or compiles a third-party workload or a sharded layer
# under Inductor, tens of seconds a case; the ones left to -m slow each differ from a case the
# default suite keeps in one parameter (the other dtype, the tall shape, a variant of the same
# solve, a package's dynamic=True run where automatic dynamic shapes train it by default).
# A test function maps to the ids of its parametrizations marked slow, or to N: every Nth
# parametrization runs by default (N coprime with the table's inner sizes, so every value of
# every parameter still runs).
DEFAULT_RUN_LEAVES_TO_SLOW = {
    "tests/test_singular.py::test_onnx_runtime": {
        "pinv variants-dtype4", "svd rebuilt-dtype8", "pinv hermitian-dtype9", "polar-dtype10", "matrix_sqrth-dtype11"},
    "tests/test_factorizations.py::test_onnx_runtime_householder_qr_is_lapacks": {
        "geqrf-tall", "householder_product-tall", "ormqr right adjoint-tall", "ormqr-tall", "qr complete-tall",
        "qr r-tall"},
    "tests/test_factorizations.py::test_solves_inverses_and_cholesky_in_every_front_end_and_onnx_runtime": {
        "solve right", "solve vector", "cholesky_solve upper"},
    "tests/test_factorizations.py::test_onnx_runtime_ldl_is_lapacks": {"symmetric"},
    "tests/test_cholesky.py::test_onnx_runtime_like_eager": {"False-dtype1", "True-dtype1"},
    "tests/test_cholesky.py::test_onnx_runtime_accuracy_on_ill_conditioned_inputs": {"10000.0", "1000000.0"},
    "tests/test_lu.py::test_onnx_runtime_solve_accuracy": {"100.0", "10000.0"},
    "tests/test_jacobi.py::test_onnx_runtime_eigh_and_eigvalsh": {"16"},
    "tests/test_linalg_workloads.py::test_onnx_runtime_matches_eager": {"mimo-mmse"},
    "tests/test_dynamic.py::test_workload_with_dynamic_shapes": {
        "neuralop-fno-train", "neuralop-fno-torch-einsum-train", "auraloss-mrstft-train", "quantum-train"},
    "tests/test_tensor_parallel.py::test_tensor_parallel_complex_layers_under_inductor": {"mlp", "sequence-parallel"},
    "tests/test_backend.py::test_writes_to_inputs_of_every_layout_match_eager": 3,
    # Inductor compiles each function forward and backward at every special point (about 50 s
    # a function with a cold cache); the eager inner compiler and decompose run every function
    # (test_unary_gradients_match_eager_at_special_points); asin stays for acosh's path
    "tests/test_gradients.py::test_compiled_gradients_match_eager_at_special_points": {
        "cos", "tanh", "rsqrt", "atanh", "angle"},
}


def _mark_default_share(items: list) -> None:
    seen: dict[str, int] = {}
    for item in items:
        function, _, rest = item.nodeid.partition("[")
        slow = DEFAULT_RUN_LEAVES_TO_SLOW.get(function)
        if slow is None or getattr(item, "callspec", None) is None:
            continue
        index = seen[function] = seen.get(function, -1) + 1
        if (index % slow != 0) if isinstance(slow, int) else rest.removesuffix("]") in slow:
            item.add_marker(pytest.mark.slow)


# Each compatibility run takes one half of that selection, alternating by position, the
# half chosen by the release's minor version (2.13 the odd positions, 2.14 the even ones): the
# two runs together cover the whole selection once, each release half of it, in half the time.
# The fuzzer runs whole under every release.
COMPAT_RUN_BOTH_HALVES = {"test_fuzz"}


def _release_half(items: list) -> list:
    half = int(torch.__version__.split(".")[1]) % 2
    kept, position = [], 0
    for item in items:
        module = item.nodeid.split("::")[0].rsplit("/", 1)[-1].removesuffix(".py")
        if module in COMPAT_RUN_BOTH_HALVES or item.get_closest_marker("slow") is not None:
            kept.append(item)
            continue
        if position % 2 == half:
            kept.append(item)
        position += 1
    return kept


@pytest.hookimpl(tryfirst=True)  # before -m deselects what is marked slow here
def pytest_collection_modifyitems(config, items):
    _mark_default_share(items)
    if not os.environ.get("REALIFY_COMPAT_RUN"):
        return
    kept = _release_half(_strided([item for item in items if _in_compat_run(item)]))
    chosen = set(map(id, kept))
    config.hook.pytest_deselected(items=[item for item in items if id(item) not in chosen])
    items[:] = kept
