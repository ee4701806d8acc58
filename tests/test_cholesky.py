"""The Cholesky factorization (realify/rules/linalg.py: LAPACK's cpotrf/zpotrf on pairs) in
every front end against eager, and its ONNX translation (realify/onnx/cholesky.py: the real Cholesky of
the interleaved embedding E(A), unrolled column by column)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import torch
from backend_support import RecordingInner
from torch.utils._pytree import tree_unflatten

import realify
from realify import ComplexTensor
from realify.onnx import to_onnx

DTYPES = [torch.complex64, torch.complex128]


def hpd(*batch: int, n: int, dtype=torch.complex128, cond: float | None = None, seed: int = 0) -> torch.Tensor:
    """A Hermitian positive-definite matrix: X X^H / n + I, or Q diag(eigenvalues) Q^H with
    eigenvalues spread geometrically from 1 to 1/cond."""
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(*batch, n, n, dtype=dtype, generator=g)
    if cond is None:
        return X @ X.mH / n + torch.eye(n, dtype=dtype)
    Q, _ = torch.linalg.qr(X.to(torch.complex128))
    values = torch.logspace(0, -np.log10(cond), n, dtype=torch.float64).to(torch.complex128)
    return ((Q * values.unsqueeze(-2)) @ Q.mH).to(dtype)


def factor_bound(A: torch.Tensor) -> float:
    """How far apart two backward-stable Cholesky factors of a well-conditioned A may be, entry
    by entry: each is the exact factor of A + dA with ||dA|| <= c n u ||A||, and the factor moves
    by at most cond(A) times that, relative to ||L|| (Sun's perturbation bound). The inputs here
    have cond(A) <= 10 or so; c = 10."""
    n = A.shape[-1]
    u = torch.finfo(A.real.dtype).eps / 2
    cond = torch.linalg.cond(A.to(torch.complex128)).max().item()
    return 2 * 10 * n * u * cond * torch.linalg.matrix_norm(A, 2).max().item() ** 0.5


def compiled(fn, **options):
    rec = RecordingInner()
    return realify.compile(fn, inner=rec, strict=True, **options), rec


def real_only(rec: RecordingInner) -> bool:
    return bool(rec.graphs) and rec.complex_nodes() == []


def decomposed(fn, *args):
    gm = realify.decompose(fn, list(args))
    return tree_unflatten(gm(*args), gm.realify_signature.out_spec)


def on_complex_tensors(fn, *args):
    out = fn(*[ComplexTensor.from_complex(a) for a in args])
    return [o.to_complex() if isinstance(o, ComplexTensor) else o for o in out] if isinstance(out, tuple) else \
        out.to_complex()


def front_ends(fn, *args) -> dict:
    """fn's result through the compile backend (strict, eager inner compiler: no island),
    decompose and the eager ComplexTensor."""
    compiled_fn, rec = compiled(fn)
    results = {"compile": compiled_fn(*args), "decompose": decomposed(fn, *args),
               "ComplexTensor": on_complex_tensors(fn, *args)}
    assert real_only(rec)
    return results


# ---- values ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upper", [False, True])
def test_factor_and_info_like_eager(dtype, upper):
    A = hpd(3, 2, n=6, dtype=dtype)

    def f(A):
        return torch.linalg.cholesky_ex(A, upper=upper)

    expected = f(A)
    for name, (L, info) in front_ends(f, A).items():
        torch.testing.assert_close(L, expected.L, rtol=0, atol=factor_bound(A), msg=name)
        assert torch.equal(info, expected.info), name
        # the diagonal is exactly real and the other triangle exactly zero, as eager's
        assert torch.equal(L.diagonal(dim1=-2, dim2=-1).imag, torch.zeros(3, 2, 6, dtype=A.real.dtype)), name
        assert not (L.tril(-1) if upper else L.triu(1)).any(), name


@pytest.mark.parametrize("upper", [False, True])
def test_reads_one_triangle_and_the_real_diagonal(upper):
    # eager (LAPACK) never reads the other triangle or the diagonal's imaginary part: NaN there
    # must not reach the factor
    A = hpd(2, n=5)
    other = torch.ones(5, 5, dtype=torch.bool).tril(-1) if upper else torch.ones(5, 5, dtype=torch.bool).triu(1)
    garbage = torch.where(other, torch.complex(torch.tensor(float("nan")), torch.tensor(3.0)).to(A.dtype), A)
    garbage = garbage + 7j * torch.eye(5, dtype=A.dtype)

    def f(A):
        return torch.linalg.cholesky(A, upper=upper)

    expected = f(garbage)
    assert not expected.isnan().any()
    for name, L in front_ends(f, garbage).items():
        torch.testing.assert_close(L, expected, rtol=0, atol=factor_bound(A), msg=name)


@pytest.mark.skipif(not hasattr(torch.ops.aten, "cholesky"), reason="torch >= 2.15 removed torch.cholesky")
@pytest.mark.filterwarnings("ignore:torch.cholesky is deprecated")
def test_legacy_cholesky_where_torch_has_it():
    # torch.cholesky (deprecated) is aten.cholesky, an op of its own, before torch 2.15
    A = hpd(2, n=4)
    for upper in (False, True):
        for name, L in front_ends(lambda A, upper=upper: torch.cholesky(A, upper=upper), A).items():
            torch.testing.assert_close(L, torch.linalg.cholesky(A, upper=upper), rtol=0, atol=factor_bound(A), msg=name)


def test_dynamic_batch_sizes_compile_once():
    def f(A):
        return torch.linalg.cholesky(A)

    compiled_fn, rec = compiled(f, dynamic=True)
    for batch in (2, 5, 7):
        A = hpd(batch, n=4, dtype=torch.complex64, seed=batch)
        torch.testing.assert_close(compiled_fn(A), f(A), rtol=0, atol=factor_bound(A))
    assert [k for k, _ in rec.graphs].count("dynamo") == 1
    assert real_only(rec)


@pytest.mark.parametrize("upper", [False, True])
def test_values_and_gradients_under_inductor(upper):
    def f(X):
        A = X @ X.mH + torch.eye(X.shape[-1], dtype=X.dtype)
        return torch.linalg.cholesky(A, upper=upper)

    X = torch.randn(4, 5, 5, dtype=torch.complex64)
    compiled_fn = realify.compile(f, strict=True)
    x1, x2 = X.clone().requires_grad_(), X.clone().requires_grad_()
    got, expected = compiled_fn(x1), f(x2)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    (got.abs().sum() + got.sum(-1).real.sum()).backward()
    (expected.abs().sum() + expected.sum(-1).real.sum()).backward()
    torch.testing.assert_close(x1.grad, x2.grad, rtol=1e-3, atol=1e-4)


# ---- gradients -----------------------------------------------------------------------------


def losses(L: torch.Tensor, upper: bool = False) -> torch.Tensor:
    # gauge-free: unchanged by L -> L D (U -> D U), D a diagonal of unit phases. Eager's backward
    # is exact only for such losses (it drops the part of the gradient along the phases of
    # L's diagonal, which a loss reading Im L_ii directly would have)
    n = L.shape[-1]
    y = torch.complex(torch.arange(1.0, n + 1), torch.linspace(-1, 1, n)).to(L.dtype)
    M = L if upper else L.mH  # L^H = U, so M y = L^H y either way
    return L.abs().sum() + (M @ y).abs().sum()


@pytest.mark.parametrize("upper", [False, True])
def test_gradients_like_eager_through_hermitian_inputs(upper):
    # the factorization of X X^H + I, differentiated through the input's Hermitian directions
    X = torch.randn(2, 5, 5, dtype=torch.complex128)

    def f(X):
        return losses(torch.linalg.cholesky(X @ X.mH + torch.eye(5, dtype=X.dtype), upper=upper), upper)

    x = X.clone().requires_grad_()
    (expected,) = torch.autograd.grad(f(x), x)
    compiled_fn, rec = compiled(f)
    x = X.clone().requires_grad_()
    (got,) = torch.autograd.grad(compiled_fn(x), x)
    torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-12)
    assert real_only(rec) and "backward" in rec.kinds()
    z = ComplexTensor.from_complex(X).requires_grad_()
    (got,) = torch.autograd.grad(f(z), z)
    torch.testing.assert_close(got.to_complex(), expected, rtol=1e-10, atol=1e-12)


def test_gradient_of_the_triangle_read():
    # The factor is a function of one triangle and the real diagonal (what LAPACK reads). Eager's
    # gradient is the Hermitian part of that function's gradient (its formula symmetrizes), and
    # realify's is eager's formula: equal, in every front end
    A = hpd(n=5)

    def f(A):
        return losses(torch.linalg.cholesky(A))

    a = A.clone().requires_grad_()
    (expected,) = torch.autograd.grad(f(a), a)
    torch.testing.assert_close(expected, expected.mH)
    compiled_fn, _ = compiled(f)
    a = A.clone().requires_grad_()
    (got,) = torch.autograd.grad(compiled_fn(a), a)
    torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-12)
    z = ComplexTensor.from_complex(A).requires_grad_()
    (got,) = torch.autograd.grad(f(z), z)
    torch.testing.assert_close(got.to_complex(), expected, rtol=1e-10, atol=1e-12)


# ---- inputs that are not positive definite -------------------------------------------------


def not_positive_definite(dtype=torch.complex64) -> torch.Tensor:
    # batch element 0: leading minor of order 2 fails; element 1: positive definite;
    # element 2: order 3 fails (a negative pivot after two good ones)
    A = torch.eye(4, dtype=dtype).repeat(3, 1, 1)
    A[0, :2, :2] = torch.tensor([[1, 2 - 1j], [2 + 1j, 1]], dtype=dtype)
    A[2, 2, 2] = -1
    return A


def test_info_like_eager():
    A = not_positive_definite()
    expected = torch.linalg.cholesky_ex(A).info
    assert expected.tolist() == [2, 0, 3]
    for name, (_, info) in front_ends(lambda A: torch.linalg.cholesky_ex(A), A).items():
        assert torch.equal(info, expected), name
    for upper in (False, True):
        compiled_fn, _ = compiled(lambda A, upper=upper: torch.linalg.cholesky_ex(A, upper=upper))
        _, info = compiled_fn(A)
        assert torch.equal(info, torch.linalg.cholesky_ex(A, upper=upper).info)


@pytest.mark.parametrize("call", ["linalg.cholesky", "cholesky_ex(check_errors=True)"])
@pytest.mark.parametrize("batched", [False, True])
def test_raises_eager_error_where_eager_raises(call, batched):
    # linalg.cholesky checks its info with aten._linalg_check_errors, and the rule calls the same
    # check for check_errors=True: a real op on eager's info, run where the program runs, so
    # every front end raises eager's LinAlgError with eager's message (batch element, order)
    A = not_positive_definite() if batched else not_positive_definite()[2]

    def f(A):
        if call == "linalg.cholesky":
            return torch.linalg.cholesky(A)
        return torch.linalg.cholesky_ex(A, check_errors=True).L

    with pytest.raises(torch.linalg.LinAlgError) as eager:
        f(A)
    message = str(eager.value)
    assert ("Batch element 0" in message) == batched and "order 2" in message if batched else "order 3" in message
    runs = {"compile": compiled(f)[0], "inductor": realify.compile(f, strict=True),
            "decompose": lambda A: decomposed(f, A), "ComplexTensor": lambda A: on_complex_tensors(f, A),
            "export": realify.ComplexCallAdapter(realify.export(f, (hpd(*A.shape[:-2], n=4, dtype=A.dtype),)))}
    for name, run in runs.items():
        with pytest.raises(torch.linalg.LinAlgError) as got:
            run(A)
        assert str(got.value) == message, name


# ---- export and ONNX Runtime ---------------------------------------------------------------


def onnx_run(fn, A: torch.Tensor, *others: torch.Tensor) -> list[np.ndarray]:
    program = to_onnx(fn, (A, *others))
    session = ort.InferenceSession(program.model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
    inputs = [torch.view_as_real(a) if a.is_complex() else a for a in (A, *others)]
    return session.run(None, {i.name: x.numpy() for i, x in zip(session.get_inputs(), inputs)})


def as_complex(pairs: np.ndarray) -> torch.Tensor:
    return torch.view_as_complex(torch.from_numpy(np.ascontiguousarray(pairs)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upper", [False, True])
def test_onnx_runtime_like_eager(dtype, upper):
    A = hpd(3, n=6, dtype=dtype)
    L, info = onnx_run(lambda A: torch.linalg.cholesky_ex(A, upper=upper), A)
    expected = torch.linalg.cholesky_ex(A, upper=upper)
    torch.testing.assert_close(as_complex(L), expected.L, rtol=0, atol=factor_bound(A))
    assert np.array_equal(info, expected.info.numpy())
    # linalg.cholesky's check cannot raise in ONNX: it is left out, the factor stays
    (L,) = onnx_run(lambda A: torch.linalg.cholesky(A, upper=upper), A)
    torch.testing.assert_close(as_complex(L), expected.L, rtol=0, atol=factor_bound(A))


def test_onnx_runtime_info_and_the_triangle_read():
    A = not_positive_definite()
    _, info = onnx_run(lambda A: torch.linalg.cholesky_ex(A), A)
    assert info.tolist() == [2, 0, 3]
    # a real program's own Cholesky: LAPACK's triangle (NaN in the other is never read)
    R = hpd(2, n=5, dtype=torch.float64)
    for upper in (False, True):
        other = torch.ones(5, 5, dtype=torch.bool).tril(-1) if upper else torch.ones(5, 5, dtype=torch.bool).triu(1)
        garbage = torch.where(other, float("nan"), R)
        L, info = onnx_run(lambda R, upper=upper: torch.linalg.cholesky_ex(R, upper=upper), garbage)
        torch.testing.assert_close(torch.from_numpy(L), torch.linalg.cholesky(R, upper=upper), rtol=0, atol=1e-14)
        assert not info.any()


@pytest.mark.parametrize("cond", [1e2, 1e4, 1e6])
def test_onnx_runtime_accuracy_on_ill_conditioned_inputs(cond):
    # complex64, n = 16 (a 32 x 32 real factorization in ONNX): the backward error
    # ||L L^H - A|| / ||A|| is a small multiple of n u whatever the condition number, as
    # LAPACK's; the forward error grows with cond(A) and stays within cond(A) times that
    n = 16
    A = hpd(4, n=n, dtype=torch.complex64, cond=cond)
    (L,) = onnx_run(lambda A: torch.linalg.cholesky(A), A)
    L = as_complex(L).to(torch.complex128)
    A64 = A.to(torch.complex128)
    u = torch.finfo(torch.float32).eps / 2
    backward = (torch.linalg.matrix_norm(L @ L.mH - A64) / torch.linalg.matrix_norm(A64)).max().item()
    lapack = torch.linalg.cholesky(A).to(torch.complex128)
    lapack_backward = (torch.linalg.matrix_norm(lapack @ lapack.mH - A64) / torch.linalg.matrix_norm(A64)).max().item()
    assert backward <= 2 * n * u, (backward, lapack_backward)
    exact = torch.linalg.cholesky(A64)
    forward = (torch.linalg.matrix_norm(L - exact) / torch.linalg.matrix_norm(exact)).max().item()
    assert forward <= 2 * n * u * cond, forward
