"""Autograd semantics of the captured program kept through decomposition (realify/engine/grad_semantics.py,
realify/engine/custom_functions.py): every way a program cuts, replaces or observes the gradient path,
values and gradients against eager (and torch.compile's default, which keeps them), under the
eager inner compiler and Inductor.

Each program takes ``z`` (4 x 8) and ``w`` (8 x 8), complex, both requiring grad; the loss is
``sum |out|^2`` over its outputs. Compared: the outputs, both inputs' gradients, both inputs'
values after the call (programs that write them under ``no_grad``), and retained gradients.
"""

from __future__ import annotations

import importlib.util

import pytest
import torch

import realify

C64 = torch.complex64


# ---- custom Functions: backward that is not the forward's derivative -----------------------------


class PhaseQuantizer(torch.autograd.Function):
    """A straight-through phase quantizer (optical and communication networks): unit modulus,
    phase rounded to multiples of pi/2; the gradient passes through unchanged."""

    @staticmethod
    def forward(ctx, x):
        return torch.polar(torch.ones_like(x.abs()), torch.round(x.angle() * (2 / torch.pi)) * (torch.pi / 2))

    @staticmethod
    def backward(ctx, grad):
        return grad


class Doubled(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    def backward(ctx, grad):
        return 2 * grad


class SavedProduct(torch.autograd.Function):
    """Saves its inputs and an intermediate; a backward that scales one gradient by 3 and
    conjugates against the saved values (not the forward's derivative)."""

    @staticmethod
    def forward(ctx, x, y):
        s = x * y
        ctx.save_for_backward(x, y, s)
        return s.exp()

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        x, y, s = ctx.saved_tensors
        g = grad * s.exp().conj()
        return 3 * g * y.conj(), g * x.conj()


class WithMagnitude(torch.autograd.Function):
    """A complex output and a real one marked non-differentiable."""

    @staticmethod
    def forward(ctx, x):
        magnitude = x.abs()
        ctx.mark_non_differentiable(magnitude)
        return x * 2, magnitude

    @staticmethod
    def backward(ctx, grad, _grad_magnitude):
        return grad * 3


class MixedRealComplex(torch.autograd.Function):
    """A complex and a real input, a complex and a real output."""

    @staticmethod
    def forward(ctx, x, r):
        ctx.save_for_backward(r)
        return x * r, r.sum()

    @staticmethod
    def backward(ctx, grad, grad_sum):
        (r,) = ctx.saved_tensors
        return grad * r, torch.ones_like(r) * grad_sum + (grad * r).real


# ---- the programs --------------------------------------------------------------------------------


def detach_max(z, w):
    s = (z @ w).abs().max().detach()
    return (z / s) @ w


def no_grad_max(z, w):
    with torch.no_grad():
        s = (z @ w).abs().max()
    return (z / s) @ w


def inference_mode_max(z, w):
    with torch.inference_mode():
        s = (z @ w).abs().max()
    return (z / s.clone()) @ w


def detach_product(z, w):
    s = (z @ w).detach()
    return (z * s) @ w


def set_grad_enabled_calls(z, w):
    torch.set_grad_enabled(False)
    s = (z @ w).sum()
    torch.set_grad_enabled(True)
    return (z * s) @ w


def gradient_reversal(z, w):
    y = z @ w
    return (y.detach() * 2 - y).exp()


def nested_grad_modes(z, w):
    with torch.no_grad():
        with torch.enable_grad():
            a = z @ w  # requires grad: grad mode enabled again inside
        b = a * 2  # does not
    return a * b


def detached_view_of_pairs(z, w):
    v = torch.view_as_real(w).detach()[..., 0]  # the real parts, cut
    return z @ (w * v)


def detached_conj_view(z, w):
    return z @ (w.conj().detach() * w)


def ema_update_of_leaf(z, w):
    with torch.no_grad():
        w.mul_(0.9)
    return z @ w


def write_into_detached_alias(z, w):
    v = w.detach()
    v.mul_(2)  # changes w's value; w's gradient path is as it was
    return z @ w


def write_into_detached_row(z, w):
    w.detach()[0].mul_(2)
    return z @ w


def no_grad_write_of_row(z, w):
    with torch.no_grad():
        w[0].mul_(0.5)
    return z @ w


def no_grad_write_of_intermediate(z, w):
    y = z @ w
    with torch.no_grad():
        y[0] = 0  # y keeps its gradient history; the write is not part of it
    return y.exp()


def no_grad_value_written_into_grad_tensor(z, w):
    with torch.no_grad():
        s = (z @ w).abs().max()
    y = z * 1
    y[0] = s  # a value without gradient written into a tensor with one
    return y @ w


def no_grad_read_of_a_base_written_through_a_view(z, w):
    buf = torch.zeros(4, 8, dtype=z.dtype)
    buf[:, :4] = z[:, :4] * 2  # the write through a view gives buf a gradient history
    with torch.no_grad():
        s = buf.abs().max()  # which the no_grad read cuts
    return (buf / s) @ w


def straight_through_quantizer(z, w):
    return PhaseQuantizer.apply(z @ w) @ w


def doubled_gradient(z, w):
    return Doubled.apply(z @ w) * w.sum()


def saved_for_backward(z, w):
    return SavedProduct.apply(z, w[:4].conj())


def non_differentiable_output(z, w):
    a, magnitude = WithMagnitude.apply(z @ w)
    return a * magnitude


def real_and_complex_arguments(z, w):
    y = z @ w
    a, s = MixedRealComplex.apply(y, y.abs())
    return a * s


def hook_doubles(z, w):
    y = z @ w
    y.register_hook(lambda g: g * 2)
    return y.exp()


def hook_reads_the_complex_gradient(z, w):
    y = z @ w
    y.register_hook(lambda g: g.conj() * 1j)  # any other gradient than eager's shows
    return y.exp()


def hook_with_captured_tensor(z, w):
    y = z @ w
    early = y * 2  # read before the hook is registered: its gradient passes the hook too
    c = w.sum()
    y.register_hook(lambda g: g * c.conj())
    return y.exp() + early


def hooks_in_registration_order(z, w):
    y = z @ w
    y.register_hook(lambda g: g * 1j)
    y.register_hook(lambda g: g.conj())
    return y.exp()


def hook_returning_none(z, w):
    y = z @ w
    y.register_hook(lambda g: None)
    return y.exp()


def hook_on_input(z, w):
    w.register_hook(lambda g: g * 2)
    return z @ w


def retain_grad_of_intermediate(z, w):
    y = z @ w
    y.retain_grad()
    return y, y.exp()


def detach_across_graph_break(z, w):
    s = (z @ w).detach()
    torch._dynamo.graph_break()
    return (z * s) @ w


def no_grad_across_graph_break(z, w):
    with torch.no_grad():
        s = z @ w
        torch._dynamo.graph_break()
        s = s * 2
    return (z * s) @ w, s


def func_grad_inside(z, w):
    g = torch.func.grad(lambda x: (x * w[0, 0]).abs().sum())(z.real)
    return z * g


def write_beside_custom_function(z, w):
    # an in-place write whose result nothing reads, beside a custom Function: once dropped by
    # the pass that set the Function aside (realify/engine/custom_functions.py)
    doubled = Doubled.apply(z)
    y = z @ w
    y.mul_(w[0, 0])
    return y, doubled


def hook_beside_write(z, w):
    y = z @ w
    y.register_hook(lambda g: g * 2)
    out = y * 1j
    out.add_(z.sum())
    return out


ISSUE_PROGRAMS = [detach_max, no_grad_max, inference_mode_max, detach_product, set_grad_enabled_calls,
                  gradient_reversal, straight_through_quantizer, doubled_gradient, hook_doubles, ema_update_of_leaf]
PROGRAMS = [*ISSUE_PROGRAMS, nested_grad_modes, detached_view_of_pairs, detached_conj_view, write_into_detached_alias,
            write_into_detached_row, no_grad_write_of_row, no_grad_write_of_intermediate,
            no_grad_value_written_into_grad_tensor, no_grad_read_of_a_base_written_through_a_view, saved_for_backward,
            non_differentiable_output, real_and_complex_arguments, hook_reads_the_complex_gradient,
            hook_with_captured_tensor, hooks_in_registration_order, hook_returning_none, hook_on_input,
            retain_grad_of_intermediate, func_grad_inside, detach_across_graph_break, no_grad_across_graph_break,
            write_beside_custom_function, hook_beside_write]
# dynamo records a hook on an intermediate in the graph from torch 2.15
HAS_IN_GRAPH_HOOKS = importlib.util.find_spec("torch._higher_order_ops.register_hook") is not None


def _run(program, compiled, kind: str, dtype: torch.dtype = C64):
    """Outputs, gradients of the leaves, the arguments after the call and retained gradients."""
    gen = torch.Generator().manual_seed(0)
    z = torch.randn(4, 8, dtype=dtype, generator=gen)
    w = torch.randn(8, 8, dtype=dtype, generator=gen)
    if kind == "axis":
        z = torch.complex(z.real, torch.zeros_like(z.real))
        w = torch.complex(-torch.zeros_like(w.real), w.imag)
    z.requires_grad_()
    w.requires_grad_()
    args = (z, w)
    if kind == "views":
        args = (z.conj(), w.mT.conj())
    outs = compiled(*args)
    outs = outs if isinstance(outs, tuple) else (outs,)
    requires_grad = [o.requires_grad for o in outs]
    loss = sum(o.abs().pow(2).sum() for o in outs)
    loss.backward()
    retained = [o.grad for o in outs if o.requires_grad and o.retains_grad]
    return [o.detach() for o in outs], [z.grad, w.grad], [z.detach(), w.detach()], retained, requires_grad


def _compare(got, expected):
    """``requires_grad`` of each output as eager's; the values normwise: ``max |a - b| <= tol * max
    |b|`` per tensor. The programs chain up to four products and sums of up to 64 terms; each such
    sum rounds to within n eps of the sum of its terms' magnitudes, which for these random inputs
    is within a small factor of the result's largest element, so 100 eps bounds every difference
    between two correct orders of summation (eager's, and realify's real GEMMs'), where elementwise
    bounds fail on elements that cancel. A wrong gradient (a stop-gradient lost, a hook skipped) is
    off by O(1)."""
    *got, got_flags = got
    *expected, expected_flags = expected
    assert got_flags == expected_flags, f"requires_grad of the outputs: {got_flags}, eager's {expected_flags}"
    for kind, g, e in zip(("output", "gradient", "input after the call", "retained gradient"), got, expected):
        assert len(g) == len(e), kind
        for i, (a, b) in enumerate(zip(g, e)):
            assert (a is None) == (b is None), f"{kind} {i}: {a} against eager's {b}"
            if a is None:
                continue
            assert a.dtype == b.dtype and a.shape == b.shape, f"{kind} {i}: {a.dtype} {a.shape} != {b.dtype} {b.shape}"
            eps = torch.finfo(a.real.dtype if a.is_complex() else a.dtype).eps
            error, scale = (a - b).abs().max().item(), b.abs().max().item()
            assert error <= 100 * eps * scale, \
                f"{kind} {i}: max |realify - eager| = {error:.3g}, max |eager| = {scale:.3g}"


def _skip_unsupported(program):
    if program.__name__.startswith("hook") and program is not hook_on_input and not HAS_IN_GRAPH_HOOKS:
        pytest.skip("hooks on intermediates break dynamo's graph before torch 2.15 (each side is compiled apart)")


def _check_against_eager(program, inner: str) -> None:
    _skip_unsupported(program)
    expected = _run(program, program, "normal")
    with realify.config.patch(gemm_multiplications=4):  # elementwise GEMM error bound, as eager's
        got = _run(program, realify.compile(program, inner=inner), "normal")
    _compare(got, expected)


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_gradients_match_eager(program, fresh_dynamo):
    _check_against_eager(program, "eager")


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_gradients_match_eager_under_inductor(program, fresh_dynamo):
    _check_against_eager(program, "inductor")


@pytest.mark.parametrize("kind", ["axis", "views"])
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_gradients_match_eager_on_axes_and_views(program, kind, fresh_dynamo):
    _skip_unsupported(program)
    if kind == "views" and program in (ema_update_of_leaf, no_grad_write_of_row, write_into_detached_alias,
                                       write_into_detached_row, hook_on_input):
        pytest.skip("writes or hooks its argument w, which here is a view of a leaf (eager refuses to write "
                    "a leaf's view under autograd; a hook on a view is not the leaf's)")
    if kind == "views" and program is detached_view_of_pairs:
        pytest.skip("view_as_real of w, here a conj view, which eager refuses")
    expected = _run(program, program, kind)
    with realify.config.patch(gemm_multiplications=4):
        got = _run(program, realify.compile(program, inner="eager"), kind)
    _compare(got, expected)


# programs whose gradient path torch.export keeps: stop-gradients and grad-mode regions
# (wrap_with_set_grad_enabled), not writes, hooks or custom Functions (an exported program is
# the forward's trace), nor inference_mode (an inference tensor cannot be exported)
EXPORT_PROGRAMS = [detach_max, no_grad_max, detach_product, set_grad_enabled_calls, gradient_reversal,
                   nested_grad_modes, detached_conj_view, no_grad_read_of_a_base_written_through_a_view]


@pytest.mark.parametrize("program", EXPORT_PROGRAMS, ids=lambda p: p.__name__)
def test_exported_program_keeps_grad_mode_regions(program):
    """realify.export's real program, differentiated through ComplexCallAdapter, gives eager's
    gradients: a region without grad is a stop-gradient in it, as plain torch.export keeps the
    region."""
    with realify.config.patch(gemm_multiplications=4):  # elementwise GEMM error bound, as eager's
        args = _run(program, lambda *a: a, "normal")[0]
        ep = realify.export(program, tuple(args))
        _compare(_run(program, realify.ComplexCallAdapter(ep), "normal"), _run(program, program, "normal"))


@pytest.mark.parametrize("program", ISSUE_PROGRAMS, ids=lambda p: p.__name__)
def test_torch_compile_default_agrees(program, fresh_dynamo):
    # the reference itself: torch.compile's default keeps these semantics, so a difference
    # between realify and eager is realify's
    _compare(_run(program, torch.compile(program), "normal"), _run(program, program, "normal"))


# ---- the same constructs around factorizations (LAPACK on pairs, realify/rules/factorizations.py) --
# Each loss is gauge-free (projectors, V diag(L) V^H, |.|), as eager's eigh and svd derivatives
# require; the factorizations are eager's own calls on eager's numbers, so the programs differ from
# eager only by the products around them.


class SingularValuesStraightThrough(torch.autograd.Function):
    """svdvals forward, a backward that is not its derivative (a straight-through estimate)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.linalg.svdvals(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad.sum() * x / torch.linalg.matrix_norm(x)


def eigh_with_detached_values(z, w):
    values, vectors = torch.linalg.eigh(w + w.mH)
    return z @ ((vectors * values.detach()) @ vectors.mH)


def qr_under_no_grad(z, w):
    with torch.no_grad():
        q, _ = torch.linalg.qr(w)
    _, r = torch.linalg.qr(w)
    return z @ q @ r


def svd_values_in_custom_function(z, w):
    return z * SingularValuesStraightThrough.apply(w).sum()


def solve_with_hooked_factor(z, w):
    a = w + 8 * torch.eye(8, dtype=w.dtype)
    a.register_hook(lambda g: 2 * g)
    return torch.linalg.solve(a, z.mT)


def cholesky_of_detached_gram(z, w):
    gram = w @ w.mH + torch.eye(8, dtype=w.dtype)
    return torch.cholesky_solve(z.mT, torch.linalg.cholesky(gram.detach())) + torch.linalg.cholesky(gram) @ z.mT


def pinv_of_shared_memory(z, w):
    # the same storage read through two views: w and w's first four rows
    return torch.linalg.pinv(w[:4]) @ z, torch.linalg.pinv(w) @ z.mT


FACTORIZATION_PROGRAMS = [eigh_with_detached_values, qr_under_no_grad, svd_values_in_custom_function,
                          solve_with_hooked_factor, cholesky_of_detached_gram, pinv_of_shared_memory]


@pytest.mark.parametrize("inner", ["eager", "inductor"])
@pytest.mark.parametrize("program", FACTORIZATION_PROGRAMS, ids=lambda p: p.__name__)
def test_factorizations_keep_autograd_semantics(program, inner, fresh_dynamo):
    if program is solve_with_hooked_factor and not HAS_IN_GRAPH_HOOKS:
        pytest.skip("hooks on intermediates break dynamo's graph before torch 2.15 (each side is compiled apart)")
    expected = _run(program, program, "normal")
    with realify.config.patch(gemm_multiplications=4):
        got = _run(program, realify.compile(program, inner=inner), "normal")
    _compare(got, expected)


def test_complex128_custom_function_and_no_grad(fresh_dynamo):
    for program in (straight_through_quantizer, no_grad_max, hook_with_captured_tensor):
        torch._dynamo.reset()
        expected = _run(program, program, "normal", torch.complex128)
        got = _run(program, realify.compile(program, inner="eager"), "normal", torch.complex128)
        _compare(got, expected)


def test_hook_reading_the_hooked_value_is_a_named_error(fresh_dynamo):
    if not HAS_IN_GRAPH_HOOKS:
        pytest.skip("hooks on intermediates break dynamo's graph before torch 2.15")

    def program(z, w):
        y = z @ w
        c = y.sum().detach()
        y.register_hook(lambda g: g * c)
        return y.exp()

    z, w = (torch.randn(4, 8, dtype=C64, requires_grad=True), torch.randn(8, 8, dtype=C64, requires_grad=True))
    with pytest.raises(realify.MissingRuleError, match="hook that reads a value computed from the hooked tensor"):
        realify.compile(program, inner="eager")(z, w)


def test_in_place_custom_function_is_a_named_error(fresh_dynamo):
    class Dirty(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    def program(z, w):
        return Dirty.apply(z @ w).exp()

    z, w = (torch.randn(4, 8, dtype=C64, requires_grad=True), torch.randn(8, 8, dtype=C64, requires_grad=True))
    try:
        out = realify.compile(program, inner="eager")(z, w)
    except realify.MissingRuleError as err:
        assert "marks an input dirty" in str(err) or "writes its inputs in place" in str(err)
        return
    # dynamo may run such a Function eagerly itself (a graph break): then it is eager's
    out.abs().sum().backward()
    z2, w2 = z.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    program(z2, w2).abs().sum().backward()
    torch.testing.assert_close(z.grad, z2.grad)


def test_no_stop_gradient_where_the_program_has_none(fresh_dynamo):
    # programs without autograd constructs get the same real graph as before: no detach,
    # no straight-through node
    graphs = []

    def inner(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    def program(z, w):
        return (z @ w).exp() * z.sum()

    z, w = (torch.randn(4, 8, dtype=C64, requires_grad=True), torch.randn(8, 8, dtype=C64, requires_grad=True))
    realify.compile(program, inner=inner)(z, w)
    targets = {str(n.target) for gm in graphs for n in gm.graph.nodes}
    assert not any("detach" in t or "straight_through" in t for t in targets), targets


def test_explain_names_custom_functions_and_stop_gradients(fresh_dynamo):
    z, w = (torch.randn(4, 8, dtype=C64, requires_grad=True), torch.randn(8, 8, dtype=C64, requires_grad=True))
    report = realify.explain(straight_through_quantizer, z, w)
    assert not report.islands and "custom autograd.Function" in str(report), str(report)
    report = realify.explain(no_grad_max, z, w)
    text = str(report)
    assert not report.islands and "stop_gradient" in text and "no_grad_max: s = (z @ w)" in text, text


def _copied_into_real(w, z):
    y = w * 2
    y.copy_(z * (1 - 2j))  # the real part; eager warns that the imaginary part is discarded
    return y * 3


def _through_complex_tensor(w, z):
    return _copied_into_real(w, realify.ComplexTensor.from_complex(z))


def _through_export(w, z):
    return realify.ComplexCallAdapter(realify.export(_copied_into_real, (w.detach(), z.detach())))(w, z)


COPY_FRONT_ENDS = {
    "compile-eager": lambda w, z: realify.compile(_copied_into_real, inner="eager")(w, z),
    "compile-inductor": lambda w, z: realify.compile(_copied_into_real, inner="inductor")(w, z),
    "complex-tensor": _through_complex_tensor,
    "export": _through_export,
}


@pytest.mark.parametrize("front_end", list(COPY_FRONT_ENDS))
def test_a_real_tensor_overwritten_by_a_complex_copy_keeps_eagers_connection(front_end, fresh_dynamo):
    """The overwritten tensor's history gets eager's zero gradient (a zero tensor, not None: a
    real leaf reached only through it still has a gradient), the complex source its real
    part's; ``.backward()`` fills both leaves' ``.grad`` as eager's does."""
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(3, 4, generator=gen, requires_grad=True)
    z = torch.randn(3, 4, dtype=C64, generator=gen, requires_grad=True)
    _copied_into_real(w, z).sum().backward()
    expected = (w.grad, z.grad)
    w.grad = z.grad = None
    COPY_FRONT_ENDS[front_end](w, z).sum().backward()
    for g, e in zip((w.grad, z.grad), expected):
        assert g is not None, "a gradient eager gives is None"
        torch.testing.assert_close(g, e, rtol=0, atol=0)


# ---- second derivatives: torch.compile's own limit, as the default backend meets it ----------


def _gradient_norm_inside(z):
    # a gradient taken with create_graph inside the compiled function (a gradient penalty)
    y = (z.exp() * z).abs().sum()
    (g,) = torch.autograd.grad(y, z, create_graph=True)
    return g.abs().sum()


def _gradient_norm_outside(compiled, z):
    # create_graph over the compiled function's output, then a second backward through it
    (g,) = torch.autograd.grad(compiled(z), z, create_graph=True)
    g.abs().sum().backward()


@pytest.mark.parametrize("where", ["inside", "outside"])
def test_a_second_derivative_raises_as_the_default_backend_does(where, fresh_dynamo):
    """AOTAutograd compiles no double backward, for the default backend either: realify raises
    torch's own error (docs/limits.md), never a wrong second derivative. Eager's value is the
    reference that shows the program has one."""
    def first(z):
        return (z.exp() * z).abs().sum()

    def run(backend):
        z = torch.randn(4, dtype=C64, generator=torch.Generator().manual_seed(0), requires_grad=True)
        if where == "inside":
            torch.compile(_gradient_norm_inside, backend=backend)(z).backward()
        else:
            _gradient_norm_outside(torch.compile(first, backend=backend), z)
        return z.grad

    assert torch.isfinite(run("eager")).all()  # dynamo alone, no AOTAutograd: eager's second derivative
    with pytest.raises(RuntimeError) as default:
        run("aot_eager")
    torch._dynamo.reset()
    with pytest.raises(type(default.value), match="does not currently support double backward"):
        run("realify")
