"""Complex mixed precision (realify.config.complex_autocast, realify/passes/autocast.py): under
torch.autocast, the real products of complex GEMMs and convolutions run on autocast's dtype;
everything else, and everything with the switch off, stays as eager computes it."""

import pytest
import torch
import torch.nn.functional as F

import realify
from realify.passes.autocast import PRODUCTS

C64, C128 = torch.complex64, torch.complex128
# unit roundoff: bfloat16 keeps 8 significant bits, float16 11
UNIT = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}

# bilinear complex products, each as autocast sees it (matmul, einsum and linear decompose
# into mm/bmm, conv*d into convolution), with operand shapes
PRODUCT_PROGRAMS = {
    "matmul": (lambda a, b: a @ b, (24, 32), (32, 16)),
    "einsum": (lambda a, b: torch.einsum("bix,iox->box", a, b), (4, 12, 9), (12, 10, 9)),
    "bmm": (torch.bmm, (3, 8, 16), (3, 16, 8)),
    "linear": (F.linear, (6, 20), (12, 20)),
    "conv1d": (lambda a, b: F.conv1d(a, b, padding=1), (2, 6, 30), (8, 6, 3)),
    "conv2d": (F.conv2d, (2, 4, 10, 10), (6, 4, 3, 3)),
}


def _operands(a_shape, b_shape, kind):
    a, b = torch.randn(a_shape, dtype=C64), torch.randn(b_shape, dtype=C64)
    if kind == "nearly_real":  # imaginary parts 1% of real ones: where a product's form shows
        a, b = torch.complex(a.real, 0.01 * a.imag), torch.complex(b.real, 0.01 * b.imag)
    return a, b


def _compiled(fn, dtype, switch, inner="eager"):
    torch._dynamo.reset()
    compiled = realify.compile(fn, inner=inner)

    def call(*args):
        with realify.config.patch(complex_autocast=switch), torch.autocast("cpu", dtype=dtype):
            return compiled(*args)
    return call


def _rounding_bound(fn, a, b, dtype):
    """Componentwise bound on the four-product form with both operands rounded to ``dtype``,
    products summed in float32 and each sum rounded to ``dtype``: per part,
    ``(3u + u^2) (P(|x|, |y|) + P(|x'|, |y'|))`` over the part's two products ``P``; the float32
    sums (at most 288 terms here: < 2e-5 relative) are covered by adding 1e-4."""
    ar, ai, br, bi = (t.abs().double() for t in (a.real, a.imag, b.real, b.imag))
    scale = 3 * UNIT[dtype] + UNIT[dtype] ** 2 + 1e-4
    return scale * (fn(ar, br) + fn(ai, bi)), scale * (fn(ar, bi) + fn(ai, br))


@pytest.mark.parametrize("kind", ["normal", "nearly_real"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("name", PRODUCT_PROGRAMS)
def test_complex_products_under_autocast_run_on_lower_precision_parts(fresh_dynamo, name, dtype, kind):
    fn, a_shape, b_shape = PRODUCT_PROGRAMS[name]
    a, b = _operands(a_shape, b_shape, kind)
    exact = fn(a.to(C128), b.to(C128))
    got = _compiled(fn, dtype, True)(a, b)
    assert got.dtype == C64  # complex values stay complex64 between products
    re_bound, im_bound = _rounding_bound(fn, a, b, dtype)
    # within the four-product form's bound, part by part: Gauss's three products would miss
    # the imaginary bound on nearly real operands (its cancellation is relative to |re + im|)
    assert ((got.real.double() - exact.real).abs() <= re_bound).all()
    assert ((got.imag.double() - exact.imag).abs() <= im_bound).all()
    # and really in the lower precision: float32 products land within 1e-6 of the exact value
    assert (got.to(C128) - exact).norm() / exact.norm() > 1e-5
    # with the switch off, autocast leaves complex products in complex64, as eager does
    off = _compiled(fn, dtype, False)(a, b)
    with torch.autocast("cpu", dtype=dtype):
        eager = fn(a, b)
    assert eager.dtype == C64
    torch.testing.assert_close(off, eager, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("name", ["matmul", "einsum", "conv2d"])
def test_gradients_of_lower_precision_products(fresh_dynamo, name):
    """Backward runs the products' gradients on bfloat16 parts too (autograd differentiates the
    real graph); gradients agree with complex128 within a few units of bfloat16 roundoff,
    normwise (the componentwise bound of the forward test, applied to each backward product,
    gives about u for random operands: measured 0.6u-1.3u)."""
    fn, a_shape, b_shape = PRODUCT_PROGRAMS[name]
    a, b = _operands(a_shape, b_shape, "normal")
    cotangent = torch.randn(fn(a, b).shape, dtype=C64)
    exact_a, exact_b = _grads(fn, a.to(C128), b.to(C128), cotangent.to(C128))
    got_a, got_b = _grads(_compiled(fn, torch.bfloat16, True), a, b, cotangent)
    for got, exact in ((got_a, exact_a), (got_b, exact_b)):
        error = ((got.to(C128) - exact).norm() / exact.norm()).item()
        assert 1e-5 < error <= 4 * UNIT[torch.bfloat16]


def _grads(fn, a, b, cotangent):
    a, b = a.clone().requires_grad_(), b.clone().requires_grad_()
    fn(a, b).backward(cotangent)
    return a.grad, b.grad


def test_autocast_disabled_inside_the_program_keeps_float32(fresh_dynamo):
    def fn(a, b):
        with torch.autocast("cpu", enabled=False):
            inner = a @ b
        return inner, a @ b

    a, b = _operands((16, 16), (16, 16), "normal")
    exact = a.to(C128) @ b.to(C128)
    kept, lowered = _compiled(fn, torch.bfloat16, True)(a, b)
    assert (kept.to(C128) - exact).norm() / exact.norm() < 1e-6
    assert (lowered.to(C128) - exact).norm() / exact.norm() > 1e-5


class _SpectralBlock(torch.nn.Module):
    """An FNO layer: rfft2, a complex einsum over kept modes, irfft2, plus a real 1x1 conv."""

    def __init__(self, channels=4, modes=5):
        super().__init__()
        self.modes = modes
        self.weight = torch.nn.Parameter(torch.randn(channels, channels, modes, modes, dtype=C64) / channels)
        self.skip = torch.nn.Conv2d(channels, channels, 1)

    def forward(self, x):
        spectrum = torch.fft.rfft2(x)
        kept = torch.einsum("bixy,ioxy->boxy", spectrum[..., : self.modes, : self.modes], self.weight)
        out = torch.zeros_like(spectrum)
        out[..., : self.modes, : self.modes] = kept
        return torch.fft.irfft2(out, s=x.shape[-2:]) + self.skip(x)


def test_only_products_take_the_lower_precision():
    """On the real graph: every bfloat16 value is a cast or a product (the complex einsum's
    four, and the real 1x1 conv autocast lowers in eager too); FFTs and everything else stay
    float32, the complex weight stays complex64. With the switch off, only the real conv."""
    block, x = _SpectralBlock(), torch.randn(2, 4, 12, 12)

    def lowered_products(switch):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            gm = realify.decompose(lambda x, w: torch.func.functional_call(block, {"weight": w}, (x,)),
                                   [x, block.weight.detach()], complex_autocast=switch)
        low = [n for n in gm.graph.nodes if getattr(n.meta.get("val"), "dtype", None) == torch.bfloat16]
        casts = {torch.ops.prims.convert_element_type.default, torch.ops.aten._to_copy.default}
        assert all(n.target in casts or n.target in PRODUCTS for n in low), [n.target for n in low]
        return sorted(str(n.target) for n in low if n.target in PRODUCTS)

    assert lowered_products(False) == ["aten.convolution.default"]
    assert lowered_products(True) == ["aten.bmm.default"] * 4 + ["aten.convolution.default"]


def test_spectral_block_trains_under_inductor_with_lower_precision_products(fresh_dynamo):
    """The FNO layer through Inductor, forward and backward, under autocast with the switch on:
    outputs and gradients (complex weight included, complex64) agree with eager's autocast run
    within bfloat16 roundoff of a short chain (rfft2, product, irfft2: normwise 2e-2)."""
    torch.manual_seed(0)
    block, x = _SpectralBlock(), torch.randn(2, 4, 12, 12)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        eager = block(x)
    eager.float().square().mean().backward()
    expected = [eager.detach().float()] + [p.grad.clone() for p in block.parameters()]
    block.zero_grad()
    out = _compiled(block, torch.bfloat16, True, inner="inductor")(x)
    out.float().square().mean().backward()
    assert block.weight.grad.dtype == C64
    for got, want in zip([out.detach().float()] + [p.grad for p in block.parameters()], expected):
        assert ((got - want).norm() / want.norm()).item() < 2e-2


def test_complex_autocast_option_takes_booleans_only():
    with pytest.raises(TypeError, match="complex_autocast must be True or False"):
        realify.config.patch(complex_autocast="yes")


def test_turning_the_option_on_after_compiling_is_an_error_not_stale_float32(fresh_dynamo):
    """Dynamo does not guard on realify's options: a function compiled with complex_autocast
    off would keep running float32 products after it is turned on (and the reverse). The
    compiled call refuses instead, naming the option; after torch._dynamo.reset() it compiles
    again under the new value."""
    a, b = _operands((16, 16), (16, 16), "normal")
    exact = a.to(C128) @ b.to(C128)
    matmul = realify.compile(lambda a, b: a @ b, inner="eager")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert (matmul(a, b).to(C128) - exact).norm() / exact.norm() < 1e-6
        with realify.config.patch(complex_autocast=True):
            with pytest.raises(realify.OptionsChangedError, match="complex_autocast from False to True"):
                matmul(a, b)
            torch._dynamo.reset()
            assert (matmul(a, b).to(C128) - exact).norm() / exact.norm() > 1e-5
        with pytest.raises(realify.OptionsChangedError, match="complex_autocast from True to False"):
            matmul(a, b)


def test_convolution_with_same_padding_stays_float32(fresh_dynamo):
    """``padding="same"`` keeps PyTorch's composite (its real convolutions are not tagged):
    float32, as eager computes it, documented in docs/numerics.md."""
    def fn(a, b):
        return F.conv2d(a, b, padding="same")

    a, b = _operands((2, 4, 10, 10), (6, 4, 3, 3), "normal")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        eager = fn(a, b)
    torch.testing.assert_close(_compiled(fn, torch.bfloat16, True)(a, b), eager, rtol=2e-6, atol=2e-5)


def _four_product_conv2d(a, b):
    # (ar + i ai) * (br + i bi) in four real convolutions: (ar*br - ai*bi) + i (ar*bi + ai*br)
    # (eager's complex aten.convolution has no CPU kernel; its composite conv2d is Gauss's form)
    (ar, ai), (br, bi) = (a.real, a.imag), (b.real, b.imag)
    return torch.complex(F.conv2d(ar, br) - F.conv2d(ai, bi), F.conv2d(ar, bi) + F.conv2d(ai, br))


def _with_special_parts(x, seed, rate):
    """``x`` with about ``rate`` of its parts replaced by inf, -inf, nan, 0 or -0."""
    gen = torch.Generator().manual_seed(seed)
    parts = torch.view_as_real(x).clone()
    special = torch.rand(parts.shape, generator=gen) < rate
    picks = torch.tensor([float("inf"), float("-inf"), float("nan"), 0.0, -0.0])
    parts[special] = picks[torch.randint(len(picks), parts.shape, generator=gen)][special]
    return torch.view_as_complex(parts)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("name", ["matmul", "einsum", "conv2d"])
def test_special_parts_stay_where_float32_puts_them(fresh_dynamo, name, dtype):
    """Operands with infinite, NaN and zero parts: the lower-precision products give NaN and
    infinities (with their signs) exactly where the same four-product form gives them in
    float32 (casts to bfloat16/float16 keep inf, nan and signed zeros, and 4M has no
    cancellation of infinities that 3M's sums would add), and the finite entries keep the
    rounding bound of the test above. Operands are O(1): float16 overflows past 65504, as real
    autocast does."""
    fn, a_shape, b_shape = PRODUCT_PROGRAMS[name]
    a, b = _operands(a_shape, b_shape, "normal")
    rate = 0.01 if name == "conv2d" else 0.05  # a convolution output reads 36 products here
    a, b = _with_special_parts(a, 0, rate), _with_special_parts(b, 1, rate)
    # float32 in the same four-product form: F.conv2d's own composite is Gauss's (whatever
    # gemm_multiplications says), so the reference convolution is written out
    if name == "conv2d":
        reference = _four_product_conv2d(a, b)
    else:
        with realify.config.patch(gemm_multiplications=4):
            torch._dynamo.reset()
            reference = realify.compile(fn, inner="eager")(a, b)
    got = _compiled(fn, dtype, True)(a, b)
    for part in ("real", "imag"):
        g, r = getattr(got, part), getattr(reference, part)
        assert torch.equal(g.isnan(), r.isnan()), part
        assert torch.equal(g.isinf(), r.isinf()) and torch.equal(g[r.isinf()], r[r.isinf()]), part
    assert reference.isnan().any() and reference.isinf().any() and reference.isfinite().any()  # all three occur
    finite_a, finite_b = (torch.where(t.isfinite(), t, 0) for t in (a, b))  # finite entries saw finite parts only
    re_bound, im_bound = _rounding_bound(fn, finite_a, finite_b, dtype)
    exact = fn(finite_a.to(C128), finite_b.to(C128))
    kept = reference.isfinite()
    assert ((got.real.double() - exact.real).abs() <= re_bound)[kept].all()
    assert ((got.imag.double() - exact.imag).abs() <= im_bound)[kept].all()
