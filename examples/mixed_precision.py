"""Complex mixed precision against float32

Under ``torch.autocast`` with ``realify.config.complex_autocast``, realify runs the real
products that make up a complex product (matmul, einsum, linear, convolution) on bfloat16
parts with float32 accumulation, and everything else in float32. This script measures, for
each kind of product, the componentwise relative error of realify's float32 and of its
bfloat16 mixed precision against a complex128 reference, next to the bound of about ``3u``
per part (``u = 2^-8`` for bfloat16) that docs/numerics.md derives.
"""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch

import realify

torch.manual_seed(0)


def crandn(*shape):
    return torch.randn(*shape, dtype=torch.complex64)


F = torch.nn.functional
# each product as a function of its operands (weights included), so that the reference can
# widen them all to complex128
products = {
    "matmul 64x64": (lambda a, b: a @ b, (crandn(64, 64), crandn(64, 64))),
    "einsum bim,iom->bom": (lambda a, w: torch.einsum("bim,iom->bom", a, w), (crandn(8, 16, 12), crandn(16, 16, 12))),
    "linear 64 -> 64": (F.linear, (crandn(32, 64), crandn(64, 64) / 8, crandn(64))),
    "conv2d 8 -> 8, 3x3": (lambda a, w: F.conv2d(a, w, padding=1), (crandn(2, 8, 16, 16), crandn(8, 8, 3, 3) / 8)),
}


def reference(fn, args):
    return fn(*(a.to(torch.complex128) for a in args))


def componentwise_error(out, ref):
    """The median over real and imaginary parts of |out - ref| / |ref| (the median: a part
    that cancels to near zero has an unbounded relative error in any precision)."""
    out, ref = torch.view_as_real(out.to(torch.complex128)), torch.view_as_real(ref)
    return ((out - ref).abs() / ref.abs().clamp_min(1e-30)).median().item()


errors = {"float32": [], "bfloat16 parts": []}
for name, (fn, args) in products.items():
    ref = reference(fn, args)
    compiled = torch.compile(fn, backend="realify")
    with torch.no_grad():
        errors["float32"].append(componentwise_error(compiled(*args), ref))
        torch._dynamo.reset()  # the option is part of what a function compiles to
        with realify.config.patch(complex_autocast=True), torch.autocast("cpu", dtype=torch.bfloat16):
            out = torch.compile(fn, backend="realify")(*args)
        errors["bfloat16 parts"].append(componentwise_error(out, ref))
        torch._dynamo.reset()
    print(f"{name:22s} median componentwise relative error: float32 {errors['float32'][-1]:.1e}, "
          f"bfloat16 parts {errors['bfloat16 parts'][-1]:.1e} (out dtype {out.dtype})")

figure, axis = plt.subplots(figsize=(8, 3.8))
width = 0.38
positions = torch.arange(len(products)).float()
for offset, (mode, values) in zip((-width / 2, width / 2), errors.items(), strict=True):
    axis.bar(positions + offset, values, width, label=mode)
axis.axhline(3 * 2.0**-8, color="gray", linestyle="--", label="3u, u = 2^-8 (bfloat16)")
axis.axhline(2.0**-24, color="gray", linestyle=":", label="u = 2^-24 (float32)")
axis.set_xticks(positions, list(products), fontsize=8)
axis.set_yscale("log")
axis.set_ylabel("median componentwise relative error")
axis.set_title("complex products against complex128")
axis.legend(fontsize=8)
figure.tight_layout()
figure.savefig("mixed_precision.png", dpi=110)
