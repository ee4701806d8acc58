"""Control flow and function transforms on complex values inside compiled programs: cond,
while_loop, scan and map decompose into their real forms; associative_scan, vmap, func.grad
and nested_compile_region are traced through. The exported forms (and ONNX) are tested in
test_export.py."""

from __future__ import annotations

import pytest
import torch
from torch._higher_order_ops import while_loop
from torch._higher_order_ops.associative_scan import associative_scan
from torch._higher_order_ops.map import map as hop_map
from torch._higher_order_ops.scan import scan
from torch.utils._pytree import tree_leaves

import realify
from realify.bench.workloads import linear_recurrence_step

C64, C128 = torch.complex64, torch.complex128


pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def assert_all_close(actual, expected, **tol):
    actual, expected = tree_leaves(actual), tree_leaves(expected)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e, **tol)


@pytest.mark.parametrize("inner", ["inductor", "eager"])
def test_cond_on_complex_values_decomposes(inner):
    """torch.cond on complex values becomes a real cond (strict mode: no eager island): both
    branches and their gradients match eager."""
    def program(z):
        return torch.cond(z.real.sum() > 0, lambda z: z * 2j, lambda z: z.conj() * 3, (z,)).exp()

    z = torch.randn(8, dtype=C64)
    z = z - z.real.mean() + 0.5  # real parts sum to 4: z takes the first branch, -z the second
    compiled = realify.compile(program, inner=inner, strict=True)
    for w in (z, -z):
        w = w.clone().requires_grad_()
        actual, expected = compiled(w), program(w)
        torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-6)
        (grad,) = torch.autograd.grad(actual.abs().sum(), w)
        (eager_grad,) = torch.autograd.grad(expected.abs().sum(), w)
        torch.testing.assert_close(grad, eager_grad, rtol=1e-5, atol=1e-5)


# a cond's complex result straight to the output, or one of its parts: the gradients of the
# result's parts reach cond's backward as one tensor each (realify/engine/planarize.py,
# _as_fresh_pairs); as two views of one stacked output they were refused by AOTAutograd
COND_OUTPUTS = {
    "result": lambda r: r,
    "real-part": lambda r: r.real,
    "imag-part": lambda r: r.imag,
    "both-parts": lambda r: (r.real, r.imag),
    "view-as-real": lambda r: torch.view_as_real(r),
}


# every output under the eager inner compiler; under Inductor (a compile of forward and backward
# per case, tens of seconds) the whole result, its parts and one part, with gradients, and its
# pairs without: the same real graphs
COND_CASES = [*(pytest.param("eager", o, g, id=f"eager-{o}-{'grad' if g else 'no-grad'}")
                for o in COND_OUTPUTS for g in (True, False)),
              *(pytest.param("inductor", o, True, id=f"inductor-{o}-grad") for o in ("result", "both-parts",
                                                                                       "imag-part")),
              pytest.param("inductor", "view-as-real", False, id="inductor-view-as-real-no-grad")]


@pytest.mark.parametrize("inner,output,grad", COND_CASES)
def test_cond_result_straight_to_the_output(inner, output, grad):
    def program(p, z):
        return COND_OUTPUTS[output](torch.cond(p.sum() > 0, lambda z: z.sin(), lambda z: z.cos() * 1j, (z,)))

    compiled = realify.compile(program, inner=inner, strict=True)
    z = torch.randn(5, dtype=C64)
    for p in (torch.ones(3), -torch.ones(3)):
        w = z.clone().requires_grad_(grad)
        actual, expected = compiled(p, w), program(p, w)
        assert_all_close(actual, expected, rtol=1e-5, atol=1e-6)
        if grad:
            loss = sum(torch.view_as_real(x).sum() if x.is_complex() else (x * x).sum() for x in tree_leaves(actual))
            eager_loss = sum(torch.view_as_real(x).sum() if x.is_complex() else (x * x).sum()
                             for x in tree_leaves(expected))
            torch.testing.assert_close(torch.autograd.grad(loss, w)[0], torch.autograd.grad(eager_loss, w)[0],
                                       rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("inner", ["inductor", "eager"])
def test_while_loop_result_straight_to_the_output(inner):
    def program(z, w):
        return while_loop(lambda i, z: i < 3, lambda i, z: (i + 1, z * (1 + 1j) + w), (torch.tensor(0), z))[1]

    z, w = torch.randn(4, dtype=C64), torch.randn(4, dtype=C64)
    for output in ("result", "real-part", "view-as-real"):
        torch._dynamo.reset()
        wrapped = (lambda z, w, output=output: COND_OUTPUTS[output](program(z, w)))
        assert_all_close(realify.compile(wrapped, inner=inner, strict=True)(z, w), wrapped(z, w),
                         rtol=1e-5, atol=1e-6)


def _loop(z, w):
    return while_loop(lambda i, z: i < 3, lambda i, z: (i + 1, z * (1 + 1j) + w), (torch.tensor(0), z))[1]


def _unrolled(z, w):
    for _ in range(3):
        z = z * (1 + 1j) + w
    return z


@pytest.mark.parametrize("inner", ["inductor", "eager"])
@pytest.mark.parametrize("output", ["result", "real-part", "view-as-real"])
def test_while_loop_gradients_are_the_unrolled_loops(inner, output):
    """Eager's own backward of a while_loop on complex values raises (torch's AssertionError
    "outs_to_grad length"; a real while_loop differentiates), and so does every compiled
    program that runs the loop eagerly: dynamo does where it may graph-break (docs/limits.md).
    Captured whole, the loop is realify's real while_loop, whose gradients are those of the
    same loop unrolled, computed by eager."""
    def program(z, w):
        return COND_OUTPUTS[output](_loop(z, w))

    def unrolled(z, w):
        return COND_OUTPUTS[output](_unrolled(z, w))

    z, w = (torch.randn(4, dtype=C64, requires_grad=True) for _ in range(2))
    with pytest.raises(AssertionError, match="outs_to_grad"):
        torch.autograd.grad(torch.view_as_real(_loop(z, w)).sum(), (z, w))
    actual = realify.compile(program, inner=inner, strict=True, fullgraph=True)(z, w)
    expected = unrolled(z, w)
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5)
    square = (lambda x: (torch.view_as_real(x) if x.is_complex() else x).square().sum())
    grads = torch.autograd.grad(square(actual), (z, w))
    torch.testing.assert_close(grads, torch.autograd.grad(square(expected), (z, w)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("inner", ["inductor", "eager"])
def test_while_loop_on_complex_values_decomposes(inner):
    """while_loop with a complex carried value and a complex closed-over one becomes a real
    while_loop (strict mode: no eager island)."""
    def program(z, w):
        return while_loop(lambda i, z: i < 3, lambda i, z: (i + 1, z * (1 + 1j) + w), (torch.tensor(0), z))[1]

    z, w = torch.randn(4, dtype=C64), torch.randn(4, dtype=C64)
    torch.testing.assert_close(realify.compile(program, inner=inner, strict=True)(z, w), program(z, w),
                               rtol=1e-5, atol=1e-6)


def scan_recurrence(z, w):
    """A complex carry, a complex sequence, a complex closed-over value; complex and real
    per-step outputs."""
    def step(carry, x):
        new = carry * x + w
        return new, (new.clone(), new.abs())
    return scan(step, z[0], z[1:])


@pytest.mark.parametrize("inner", ["inductor", "eager"])
def test_scan_on_complex_values_decomposes(inner):
    """scan becomes a real scan over the parts (strict mode: no eager island). Under Inductor
    the real scan compiles too: it rewrites scans into a while_loop that reads its step with
    .item(), which realify's inner compile allows (torch.compile's default fails there on any
    scan, real or complex, in torch 2.13)."""
    z, w = torch.randn(6, 3, dtype=C64), torch.randn(3, dtype=C64)
    assert_all_close(realify.compile(scan_recurrence, inner=inner, strict=True)(z, w), scan_recurrence(z, w),
                     rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("inner", ["inductor", "eager"])
def test_map_on_complex_values_decomposes(inner):
    def program(z, w):
        return hop_map(lambda x, w: ((x * w).exp(), (x * w).real), z, w)

    z, w = torch.randn(5, 3, dtype=C64), torch.randn(3, dtype=C64)
    assert_all_close(realify.compile(program, inner=inner, strict=True)(z, w), program(z, w), rtol=1e-5, atol=1e-6)


def linear_recurrence_loss(nu, theta, bu, w):
    """A linear recurrent unit (LRU): h_t = lam h_(t-1) + bu_t with a learned complex diagonal
    lam = exp(-exp(nu) + i theta), evaluated as a parallel (log-depth) scan over (a, b) pairs
    with the associative combine (a1, b1) . (a2, b2) = (a1 a2, a2 b1 + b2)."""
    lam = torch.polar(torch.exp(-torch.exp(nu)), theta)

    h = associative_scan(linear_recurrence_step, (lam.expand_as(bu), bu), dim=1, combine_mode="generic")[1]
    return ((h * w).real ** 2).mean()


@pytest.mark.parametrize("inner", ["inductor", "eager"])
def test_associative_scan_linear_recurrence_with_gradients(inner):
    """Dynamo inlines associative_scan's generic mode as vmaps of the combine function; they
    trace through realify (no island in strict mode), and loss and gradients match a complex128
    sequential reference. Bound 2e-5 relative: a log-depth scan of 37 steps in float32 (each
    step one complex multiply-add, |lam| < 1) against eager's own float32 error, about 1e-6
    here."""
    h, length = 8, 37  # odd and not a power of two: both of the combine's tails
    nu = torch.log(-torch.log(torch.rand(h) * 0.2 + 0.75)).requires_grad_()
    theta = (torch.rand(h) * 6.28).requires_grad_()
    bu = torch.randn(2, length, h, dtype=C64, requires_grad=True)
    w = torch.randn(h, dtype=C64)

    def loss_and_grads(fn, *args):
        loss = fn(*args, w.to(args[-1].dtype))
        return (loss, *torch.autograd.grad(loss, args))

    def sequential(nu, theta, bu, w):
        lam, state, states = torch.polar(torch.exp(-torch.exp(nu)), theta), torch.zeros_like(bu[:, 0]), []
        for t in range(bu.shape[1]):
            state = lam * state + bu[:, t]
            states.append(state)
        return ((torch.stack(states, 1) * w).real ** 2).mean()

    exact = loss_and_grads(sequential, *(x.detach().double().requires_grad_() if not x.is_complex()
                                         else x.detach().to(C128).requires_grad_() for x in (nu, theta, bu)))
    actual = loss_and_grads(realify.compile(linear_recurrence_loss, inner=inner, strict=True), nu, theta, bu)
    eager = loss_and_grads(linear_recurrence_loss, nu, theta, bu)
    for a, e, x in zip(actual, eager, exact):
        scale = x.abs().max()
        assert ((a.to(x.dtype) - x).abs().max() / scale).item() <= 2e-5
        assert ((e.to(x.dtype) - x).abs().max() / scale).item() <= 2e-5


def test_scan_steps_are_stored_not_inlined_under_inductor(monkeypatch):
    """Each step of a log-depth scan reaches Inductor as a realify::fusion_barrier (a stored
    buffer): inlined, Inductor's code generation doubled per level (390 s for 256 steps of
    the recurrence above, 22 s with the barriers). Other inner compilers never see the op."""
    graphs = []
    compiler = realify.inductor.inductor_compiler

    def recording(patches):
        inner = compiler(patches)
        return lambda gm, example_inputs, **kw: graphs.append(gm) or inner(gm, example_inputs, **kw)

    monkeypatch.setattr(realify.inductor, "inductor_compiler", recording)

    def program(a, b):
        return associative_scan(linear_recurrence_step, (a, b), dim=0, combine_mode="generic")[1]

    a, b = torch.randn(16, 3, dtype=C64) * 0.5, torch.randn(16, 3, dtype=C64)
    barrier = torch.ops.realify.fusion_barrier.default
    for inner in ("inductor", "eager"):
        seen = []
        # the program compiles at its first call, within the iteration
        inner_fn = "inductor" if inner == "inductor" else (lambda gm, ex: seen.append(gm) or gm.forward)  # noqa: B023
        torch.testing.assert_close(realify.compile(program, inner=inner_fn, strict=True)(a, b), program(a, b),
                                   rtol=1e-5, atol=1e-6)
        found = [gm for gm in (graphs if inner == "inductor" else seen)
                 if gm.graph.find_nodes(op="call_function", target=barrier)]
        assert bool(found) == (inner == "inductor"), inner
        torch._dynamo.reset()


def test_function_transforms_inside_compiled_programs():
    """torch.vmap and torch.func.grad inside the compiled function (functorch's levels shift
    under realify's functionalizing trace; they used to hit functorch's internal assert)."""
    def per_row(x, w):
        return torch.vmap(lambda row: (row * w).exp().sum())(x)

    def grad_of_power(t, z):
        return torch.func.grad(lambda t: ((z * t).exp().abs() ** 2).sum())(t)

    x, w, z, t = torch.randn(4, 3, dtype=C64), torch.randn(3, dtype=C64), torch.randn(3, dtype=C64), torch.randn(3)
    torch.testing.assert_close(realify.compile(per_row, strict=True)(x, w), per_row(x, w), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(realify.compile(grad_of_power, strict=True)(t, z), grad_of_power(t, z),
                               rtol=1e-5, atol=1e-5)


def test_nested_compile_region_is_inlined():
    @torch.compiler.nested_compile_region
    def block(z, w):
        return (z * w).exp()

    def program(z, w):
        return block(block(z, w), w).abs()

    z, w = torch.randn(4, dtype=C64, requires_grad=True), torch.randn(4, dtype=C64)
    actual, expected = realify.compile(program, strict=True)(z, w), program(z, w)
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(torch.autograd.grad(actual.sum(), z)[0], torch.autograd.grad(expected.sum(), z)[0],
                               rtol=1e-5, atol=1e-6)


def test_other_higher_order_ops_are_islands_or_named_errors():
    """foreach_map on complex values: an eager island equal to eager, a MissingRuleError naming
    it in strict mode."""
    from torch._higher_order_ops.foreach_map import foreach_map

    def program(xs, ys):
        return foreach_map(lambda x, y: (x * y).exp(), xs, ys)

    xs, ys = [torch.randn(3, dtype=C64) for _ in range(2)], [torch.randn(3, dtype=C64) for _ in range(2)]
    with pytest.warns(UserWarning, match="foreach_map has no planar rule.*higher-order op"):
        actual = torch.compile(program, backend="realify")(xs, ys)
    assert_all_close(actual, program(xs, ys), rtol=1e-5, atol=1e-6)
    torch._dynamo.reset()
    with pytest.raises(Exception, match=r"no rule for foreach_map.*higher-order op"):
        realify.compile(program, strict=True)(xs, ys)


def test_associative_scan_as_a_higher_order_op():
    """associative_scan's pointwise mode (CUDA only) reaches realify as the higher-order op
    itself: a graph calling it directly decomposes into the log-depth steps, each stored
    (realify::fusion_barrier), and its values match eager's generic scan."""
    import torch.fx as fx

    combine = fx.symbolic_trace(lambda a1, b1, a2, b2: (a1 * a2, a2 * b1 + b2))
    graph = fx.Graph()
    a, b = graph.placeholder("a"), graph.placeholder("b")
    scanned = graph.call_function(torch.ops.higher_order.associative_scan, (graph.get_attr("combine"), [a, b], []))
    graph.output(scanned)
    program = fx.GraphModule({"combine": combine}, graph)

    a, b = 0.5 * torch.randn(13, 3, dtype=C64), torch.randn(13, 3, dtype=C64)
    expected = associative_scan(linear_recurrence_step, (a, b), dim=0, combine_mode="generic")
    barrier = torch.ops.realify.fusion_barrier.default
    for keep in (True, False):
        real = realify.decompose(program, (a, b), fusion_barriers=keep)
        assert bool(real.graph.find_nodes(op="call_function", target=barrier)) == keep
        assert_all_close(real(a, b), expected, rtol=1e-5, atol=1e-6)
