"""MRI reconstruction from undersampled k-space

An MRI scanner measures the Fourier transform of the image (k-space). Measuring a quarter of
its lines makes the scan four times shorter, and the inverse FFT of the zero-filled data
then shows aliasing. This script makes a synthetic phantom with a smooth complex phase, keeps
the centre lines of k-space and a random quarter of the rest, and reconstructs the image by
gradient descent on a data-consistency term plus a smoothed total-variation penalty. Each
iteration's loss and gradient (complex FFTs, complex autograd) run through
``torch.compile(backend="realify")``.
"""

import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch

import realify  # noqa: F401  (the backend is found by name; importing realify is optional)

# the smoothing keeps the penalty's gradient Lipschitz enough for a fixed step of 1: the
# objective then decreases at every iteration
N, ITERATIONS, STEP, PENALTY, SMOOTHING = 128, 150, 1.0, 1e-2, 1e-2


def phantom(n: int) -> torch.Tensor:
    """Ellipses of different intensities, times a smooth phase (as a coil and field map give)."""
    y, x = torch.meshgrid(torch.linspace(-1, 1, n), torch.linspace(-1, 1, n), indexing="ij")
    image = torch.zeros(n, n)
    # (centre x, centre y, half-axis x, half-axis y, intensity)
    for cx, cy, ax, ay, value in [(0, 0, 0.72, 0.92, 1.0), (0, -0.02, 0.66, 0.86, -0.6), (0.22, 0, 0.12, 0.3, 0.3),
                                  (-0.22, 0, 0.16, 0.4, 0.3), (0, 0.35, 0.2, 0.24, 0.2), (0, -0.6, 0.05, 0.05, 0.4)]:
        image += value * (((x - cx) / ax) ** 2 + ((y - cy) / ay) ** 2 <= 1).float()
    return image * torch.exp(1j * torch.pi * 0.5 * (x + 0.5 * y))


def sampling_mask(n: int, fraction: float, centre: int, generator: torch.Generator) -> torch.Tensor:
    """Whole phase-encoding lines (rows): the ``centre`` lowest frequencies and a random subset."""
    rows = torch.rand(n, generator=generator) < fraction
    frequencies = torch.fft.fftfreq(n) * n
    rows |= frequencies.abs() < centre / 2
    return rows[:, None].expand(n, n).to(torch.complex64)


def objective(image, measured, mask):
    """0.5 ||M F x - y||^2 + PENALTY * sum sqrt(|grad x|^2 + SMOOTHING), F the orthonormal 2-D FFT."""
    residual = mask * torch.fft.fft2(image, norm="ortho") - measured
    dx = image - torch.roll(image, 1, dims=1)
    dy = image - torch.roll(image, 1, dims=0)
    smooth_tv = torch.sqrt(dx.abs() ** 2 + dy.abs() ** 2 + SMOOTHING).sum()
    return 0.5 * residual.abs().square().sum() + PENALTY * smooth_tv


def reconstruct(measured, mask, loss_fn):
    image = torch.fft.ifft2(measured, norm="ortho").clone().requires_grad_(True)  # zero-filled start
    losses, times = [], []
    for _ in range(ITERATIONS):
        start = time.perf_counter()
        loss = loss_fn(image, measured, mask)
        (gradient,) = torch.autograd.grad(loss, image)
        with torch.no_grad():
            image -= STEP * gradient  # PyTorch's complex gradient is the steepest-ascent direction
        times.append(time.perf_counter() - start)
        losses.append(loss.item())
    return image.detach(), losses, times


def relative_error(estimate, truth):
    return ((estimate - truth).norm() / truth.norm()).item()


truth = phantom(N).to(torch.complex64)
mask = sampling_mask(N, fraction=0.2, centre=12, generator=torch.Generator().manual_seed(0))
measured = mask * torch.fft.fft2(truth, norm="ortho")
zero_filled = torch.fft.ifft2(measured, norm="ortho")
print(f"k-space lines kept: {int(mask[:, 0].real.sum())} of {N}")

results = {}
for name, loss_fn in (("eager", objective), ("realify", torch.compile(objective, backend="realify"))):
    image, losses, times = reconstruct(measured, mask, loss_fn)
    results[name] = image, losses
    median_ms = sorted(times[1:])[len(times[1:]) // 2] * 1e3
    print(f"{name:8s} first iteration {times[0]:5.2f} s, then median {median_ms:6.2f} ms per iteration")

eager_image, realify_image = results["eager"][0], results["realify"][0]
print(f"relative error, zero-filled:   {relative_error(zero_filled, truth):.4f}")
print(f"relative error, reconstructed: {relative_error(realify_image, truth):.4f}")
# float32 rounding differs between the fused kernels and eager's, and 150 iterations carry it
print(f"realify against eager after {ITERATIONS} iterations: relative difference "
      f"{relative_error(realify_image, eager_image):.1e}")

figure, axes = plt.subplots(1, 5, figsize=(16, 3.4))
panels = [(truth.abs(), "phantom |x|"), (None, "k-space rows kept"),
          (zero_filled.abs(), f"zero-filled, error {relative_error(zero_filled, truth):.3f}"),
          (realify_image.abs(), f"reconstructed, error {relative_error(realify_image, truth):.3f}")]
for axis, (picture, title) in zip(axes[:4], panels, strict=True):
    axis.set_title(title, fontsize=9)
    if picture is None:  # the mask: one bar per phase-encoding line, by frequency
        frequencies = torch.fft.fftshift(torch.fft.fftfreq(N) * N)
        axis.bar(frequencies, torch.fft.fftshift(mask[:, 0].real), width=1.0, color="black")
        axis.set_xlabel("row frequency")
        axis.set_yticks([])
        continue
    axis.imshow(picture, cmap="gray", interpolation="nearest")
    axis.axis("off")
for name, (_, losses) in results.items():
    axes[4].plot(losses, label=name, linestyle="-" if name == "eager" else "--")
axes[4].set_xlabel("iteration")
axes[4].set_title("objective", fontsize=9)
axes[4].legend()
figure.tight_layout()
figure.savefig("mri_reconstruction.png", dpi=100)
