"""Eager's contract at every dtype (realify/rules/_contract.py): each product, each construct that
writes one tensor into another, in-place arithmetic, and each complex OpInfo entry with two or
more tensor operands, called with one operand changed to every other dtype eager meets (real,
complex of every width, integer, boolean, a Python complex number, a 0-d tensor; the matrix is
realify/tools/dtype_mix.py); and each OpInfo entry that takes float32 and not complex64, called
on complex operands (eager's kernels refuse them, their meta kernels, which every trace runs, do
not). The outcome of every call is eager's: a value of eager's dtype,
shape and values, or an exception of eager's type. The eager ComplexTensor front end runs the
whole matrix; the compile backend and realify.export, which reach the same check through the
same rule entry (apply_checked), run every construct and alternate strides of the OpInfo
entries (a compile per call). Where torch.compile's default backend differs from eager the same way (its
own checks, before any backend), the outcome is that shared limitation (docs/limits.md).
"""

from __future__ import annotations

import os

import pytest
import torch

from realify.tools import dtype_mix
from realify.tools.opinfo import op_id

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

COMPAT = bool(os.environ.get("REALIFY_COMPAT_RUN"))
# operand kinds for the front ends that compile per call: a real, a wider complex, an integer
# operand, a Python number and a 0-d tensor (each a different path through the check)
COMPILED_KINDS = ("float32", "complex128", "int64", "python complex", "0-d complex64")
# the other kinds, one per construct in turn (each a compile per operand position)
ROTATED_KINDS = tuple(k for k in dtype_mix.KINDS if k not in COMPILED_KINDS and k != "complex64")
# OpInfo entries under the compile backend: every twelfth (every 24th in the compatibility runs)
COMPILED_STRIDE = 24 if COMPAT else 12

# Differences from eager that stay, each with its reason: a case's name -> (front end, or None
# for every one; a marker its str() holds)
KNOWN = {
    # eager returns the real matrix's dtype, dropping the imaginary part of a complex right-hand
    # side; realify returns the complex solution (docs/limits.md)
    "linalg.solve_triangular": ((None, "float32[3, 3], complex64"), (None, "float64[3, 3], complex64")),
    # a ComplexTensor's shape is fixed at creation: resize_as_ to another shape is a named
    # NotImplementedError (docs/limits.md)
    "resize_as_": (("eager", ""),),
    # real-only entries on complex operands (test_real_only_entries_on_complex_operands): the
    # probes' lengths (0 or 1 each) fail segment_reduce's check of their sum first, for real
    # operands too: realify raises that RuntimeError, eager its dtype refusal
    "_segment_reduce.lengths": ((None, ""),),
    "_segment_reduce.offsets": ((None, ""),),
    # the sample is empty, which eager's kernel returns before dispatching on the dtype; at any
    # other size eager refuses complex searchsorted, and realify has no rule for it (a named error)
    "searchsorted": ((None, "complex64[0], complex64[0]"),),
    # a sparse CSR operand: realify.export takes strided tensors only (docs/export.md)
    "sparse.mm.reduce": (("export", ""),),
    # average pooling and interpolation of complex tensors: realify's rules compute the op on
    # each part where eager's kernels have no complex instance (realify/rules/pooling.py,
    # docs/limits.md; tests/test_pooling.py checks the values)
    **{f"nn.functional.{name}": ((None, ""),) for name in (
        "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "local_response_norm",
        "upsample_bilinear", "upsample_nearest", *(f"interpolate.{mode}" for mode in (
            "nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear", "area")))},
    "_upsample_bilinear2d_aa": ((None, ""),),
}
# realify.export takes complex64 and complex128 values only: a complex32 operand is a named
# RealifyError, every construct alike (docs/export.md)
KNOWN_EVERY_CASE = (("export", "complex32"),)


def _known(case: dtype_mix.Case, front_end: str) -> bool:
    return any(where in (None, front_end) and marker in str(case)
               for where, marker in (*KNOWN.get(case.name, ()), *KNOWN_EVERY_CASE))


def _check_all(cases, front_end: str, shared_allowed: bool = True) -> None:
    differences, shared, checked = [], [], 0
    for case in cases:
        if _known(case, front_end):
            continue
        status, what = dtype_mix.check(case, front_end)
        checked += 1
        if status == "differs":
            differences.append(what)
        elif status == "shared":
            shared.append(what)
    if not checked:
        pytest.skip("every case is a difference KNOWN lists, with its reason")
    assert not differences, "\n".join(differences)
    assert shared_allowed or not shared, "\n".join(["computes what eager refuses, as the default backend does:",
                                                    *shared])


@pytest.mark.parametrize("name", list(dtype_mix.CONSTRUCTS))
def test_constructs_eager_front_end(name):
    _check_all(dtype_mix.construct_cases_of(name), "eager")


@pytest.mark.parametrize("front_end", ["compile", "export"])
@pytest.mark.parametrize("name", list(dtype_mix.CONSTRUCTS))
def test_constructs_compiled(name, front_end, fresh_dynamo):
    _check_all(dtype_mix.construct_cases_of(name, COMPILED_KINDS), front_end,
               shared_allowed=name not in dtype_mix.IN_PLACE_ARITHMETIC)


@pytest.mark.parametrize("front_end", ["compile", "export"])
@pytest.mark.parametrize("name", list(dtype_mix.CONSTRUCTS))
def test_constructs_compiled_at_the_other_kinds(name, front_end, fresh_dynamo):
    """float64, complex32 and bool operands through the front ends that compile: one kind per
    construct, rotating over the constructs (all three for each construct would be three
    times the compiles of COMPILED_KINDS' test for three more paths through one check)."""
    kind = ROTATED_KINDS[list(dtype_mix.CONSTRUCTS).index(name) % len(ROTATED_KINDS)]
    _check_all(dtype_mix.construct_cases_of(name, (kind,)), front_end,
               shared_allowed=name not in dtype_mix.IN_PLACE_ARITHMETIC)


def _shape_params():
    """Every construct case at three shapes: one case per construct in the default suite (the
    kinds and operand positions rotating over the constructs), all of them with ``-m slow``
    (each is four compiles)."""
    for index, name in enumerate(dtype_mix.CONSTRUCTS):
        cases = list(dtype_mix.construct_cases_of(name, COMPILED_KINDS))
        for k, case in enumerate(cases):
            marks = [] if k == index % len(cases) and not COMPAT else [pytest.mark.slow]
            yield pytest.param(case, id=f"{name}-{k}", marks=marks)


@pytest.mark.parametrize("case", list(_shape_params()))
def test_constructs_at_three_shapes(case, fresh_dynamo):
    """Eager's contract at the second and third input shapes the compile backend sees (automatic
    dynamic shapes: the second compiles with symbolic sizes, the third reuses it), as at the
    first: eager's value or eager's exception at each."""
    differences = dtype_mix.check_at_shapes(case)
    allowed = case.name not in dtype_mix.IN_PLACE_ARITHMETIC
    assert not [what for kind, what in differences if kind == "differs" or not allowed], "\n".join(
        what for _, what in differences)


@pytest.fixture(scope="module")
def one_rank_mesh():
    """A one-process gloo group and its mesh: DTensor's own dispatch (sharding propagation),
    which realify's backend runs through AOTAutograd before it sees plain tensors."""
    import torch.distributed as dist
    from distributed_support import free_port
    from torch.distributed.device_mesh import init_device_mesh
    if dist.is_initialized():
        pytest.skip("a process group is already initialized in this process")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    try:
        yield init_device_mesh("cpu", (1,))
    finally:
        dist.destroy_process_group()


def _placement(name: str):
    from torch.distributed.tensor import Partial, Replicate, Shard
    return {"Replicate": Replicate(), "Shard(0)": Shard(0), "Partial": Partial()}[name]


@pytest.mark.parametrize("placement", ["Replicate", "Shard(0)", "Partial"])
@pytest.mark.parametrize("name", list(dtype_mix.CONSTRUCTS))
def test_constructs_on_dtensors(name, placement, one_rank_mesh, fresh_dynamo):
    """The constructs on DTensors through the compile backend: DTensor's dispatch runs first
    (AOTAutograd functionalizes in-place calls there, before realify's graphs), and eager's
    refusals still hold. The operand kinds that are DTensors: a real one and a wider complex one
    (a Python number takes the plain path)."""
    cases = [dtype_mix.distributed(case, one_rank_mesh, _placement(placement))
             for case in dtype_mix.construct_cases_of(name, ("float32", "complex128"))]
    _check_all(cases, "compile", shared_allowed=name not in dtype_mix.IN_PLACE_ARITHMETIC)


def _entries(stride: int = 1) -> list:
    return [pytest.param(op, id=op_id(op)) for op in dtype_mix.opinfo_entries()[::stride]]


@pytest.mark.parametrize("op", _entries(24 if COMPAT else 1))
def test_opinfo_entries_eager_front_end(op):
    _check_all(dtype_mix.opinfo_cases(op), "eager")


@pytest.mark.parametrize("op", _entries(COMPILED_STRIDE))
def test_opinfo_entries_compiled(op, fresh_dynamo):
    _check_all(dtype_mix.opinfo_cases(op, COMPILED_KINDS), "compile")


# realify.export on the entries between the compile backend's (an export per call)
@pytest.mark.parametrize("op", [pytest.param(op, id=op_id(op))
                                for op in dtype_mix.opinfo_entries()[COMPILED_STRIDE // 2::COMPILED_STRIDE]])
def test_opinfo_entries_exported(op, fresh_dynamo):
    _check_all(dtype_mix.opinfo_cases(op, COMPILED_KINDS), "export")


# OpInfo entries whose CPU kernels take float32 and not complex64, on complex operands: eager's
# kernel refuses the dtype (its meta kernel, and so every trace, does not), and realify raises
# eager's exception in every front end; where eager's kernels take complex after all, eager's value
@pytest.mark.parametrize("front_end", ["eager", "compile", "export"])
@pytest.mark.parametrize("op", [pytest.param(op, id=op_id(op))
                                for op in dtype_mix.real_only_entries()[::8 if COMPAT else 1]])
def test_real_only_entries_on_complex_operands(op, front_end, fresh_dynamo):
    cases = dtype_mix.real_only_cases(op)
    if not cases:
        pytest.skip(f"{op_id(op)}'s float32 sample has no floating tensor or dtype to make complex")
    _check_all(cases, front_end)


# OpInfo's error inputs, their floating tensors made complex: the exception type eager raises
@pytest.mark.parametrize("op", [pytest.param(op, id=op_id(op)) for op in dtype_mix.error_entries()])
def test_error_inputs_eager_front_end(op):
    cases = dtype_mix.error_cases(op)
    if not cases:
        pytest.skip(f"eager accepts every error input of {op_id(op)} once its tensors are complex")
    _check_all(cases, "eager")


def _error_entries(start: int) -> list:
    return [pytest.param(op, id=op_id(op)) for op in dtype_mix.error_entries()[start::COMPILED_STRIDE]]


# the compile backend and realify.export on alternate strides of the entries
@pytest.mark.parametrize("front_end, op", [
    *(pytest.param("compile", *p.values, id=f"compile-{p.id}") for p in _error_entries(0)),
    *(pytest.param("export", *p.values, id=f"export-{p.id}") for p in _error_entries(COMPILED_STRIDE // 2))])
def test_error_inputs_compiled(front_end, op, fresh_dynamo):
    cases = dtype_mix.error_cases(op)
    if not cases:
        pytest.skip(f"eager accepts every error input of {op_id(op)} once its tensors are complex")
    _check_all(cases, front_end)


def test_a_refusal_names_the_users_line(fresh_dynamo):
    """Every front end raises eager's exception with the user's line; the compile backend
    raises it where the captured graph raises it, at the call, as the default backend does."""
    import realify

    def program(x, w):
        return torch.nn.functional.linear(x, w)  # a float32 input to a complex layer

    x, w = torch.randn(3, 4), torch.randn(5, 4, dtype=torch.complex64)
    with pytest.raises(RuntimeError, match="expected m1 and m2 to have the same dtype") as eager:
        program(x, w)
    with pytest.raises(RuntimeError, match=r"(?s)expected m1 and m2 to have the same dtype.*"
                                           r"test_dtype_contract\.py:\d+ in program") as compiled:
        realify.compile(program, inner="eager")(x, w)
    assert type(compiled.value) is type(eager.value)
    with pytest.raises(RuntimeError, match=r"(?s)expected m1 and m2 to have the same dtype.*test_dtype_contract\.py"):
        realify.export(program, (x, w))


def test_a_kernels_refusal_of_complex_is_raised_with_nothing_printed(fresh_dynamo, capfd):
    """An op whose CPU kernel takes no complex operand (``spherical_bessel_j0``; its meta kernel takes one):
    the compile backend runs the captured graph, which raises eager's exception with the
    user's line, and prints nothing (fx's module call would print the graph's code to stderr)."""
    import realify

    def program(z):
        return torch.special.spherical_bessel_j0(z)

    z = torch.randn(3, dtype=torch.complex64)
    with pytest.raises(NotImplementedError, match="not implemented for 'ComplexFloat'"):
        program(z)
    capfd.readouterr()
    refused = r"(?s)\"spherical_bessel_j0_cpu\" not implemented.*test_dtype_contract\.py:\d+"
    with pytest.raises(NotImplementedError, match=refused):
        realify.compile(program, inner="eager")(z)
    assert "FX-traced Module" not in capfd.readouterr().err


@pytest.mark.parametrize("call", ["aten.convolution", "aten._convolution"])
def test_a_direct_complex_convolution_is_refused_as_eager_refuses_it(call, fresh_dynamo):
    """Eager's CPU kernels of aten.convolution take no complex operands: only the composite
    ``conv1d``/``conv2d``/... split them into real convolutions. A program calling the aten op
    directly gets eager's NotImplementedError from every front end; ``conv1d`` of the same
    operands still gets eager's value."""
    import realify

    z, w = torch.randn(2, 2, 9, dtype=torch.complex64), torch.randn(3, 2, 3, dtype=torch.complex64)
    if call == "aten.convolution":
        def program(z, w):
            return torch.ops.aten.convolution(z, w, None, [1], [0], [1], False, [0], 1)
    else:
        def program(z, w):
            return torch.ops.aten._convolution(z, w, None, [1], [0], [1], False, [0], 1, False, False, True, True)

    with pytest.raises(NotImplementedError) as eager:
        program(z, w)
    message = str(eager.value)
    for front_end in (realify.compile(program, inner="eager"), lambda *a: realify.export(program, a),
                      lambda *a: realify.decompose(program, list(a))):
        with pytest.raises(NotImplementedError, match=message.replace("(", r"\(").replace(")", r"\)")):
            front_end(z, w)
    convolved = realify.compile(torch.nn.functional.conv1d, inner="eager")(z, w)
    torch.testing.assert_close(convolved, torch.nn.functional.conv1d(z, w))
