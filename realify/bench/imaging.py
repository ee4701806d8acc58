"""Computational-imaging workloads, as imaging packages write them: a multi-coil MRI forward
operator and its adjoint, and optical propagation by the angular-spectrum method.

Both are built on centered 2-D FFTs: ``torch.fft.fftshift`` / ``ifftshift`` around
``fft2`` / ``ifft2`` over the last two dimensions, the way MRI code (fastMRI's ``fft2c``,
DeepInverse, sigpy) and Fourier-optics code keep the zero frequency in the middle of the array.
realify/bench/workloads.py registers them as ``mri`` and ``angular-spectrum``; every model is an
``nn.Module``, deterministic given ``torch.manual_seed``.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

C64 = torch.complex64
IMAGE_DIMS = (-2, -1)

__all__ = [
    "AngularSpectrumPropagation",
    "MRIForwardAdjoint",
    "MultiCoilMRI",
    "PhaseMaskIntensity",
    "UnrolledGradientStep",
    "angular_spectrum_transfer_function",
    "build_angular_spectrum",
    "build_mri",
    "cartesian_mask",
    "centered_fft2",
    "centered_ifft2",
    "circular_aperture",
    "coil_sensitivities",
    "fft2c",
    "ifft2c",
]


# --------------------------------------------------------------------------- centered FFTs
def fft2c(image: torch.Tensor) -> torch.Tensor:
    """Orthonormal 2-D FFT of the last two dimensions with the origin at the array's center,
    as fastMRI's ``fft2c`` writes it: ``fftshift(fft2(ifftshift(x), norm="ortho"))``."""
    shifted = torch.fft.ifftshift(image, dim=IMAGE_DIMS)
    return torch.fft.fftshift(torch.fft.fft2(shifted, norm="ortho"), dim=IMAGE_DIMS)


def ifft2c(kspace: torch.Tensor) -> torch.Tensor:
    """The inverse of :func:`fft2c` (and its adjoint: the transform is unitary),
    ``fftshift(ifft2(ifftshift(k), norm="ortho"))``."""
    shifted = torch.fft.ifftshift(kspace, dim=IMAGE_DIMS)
    return torch.fft.fftshift(torch.fft.ifft2(shifted, norm="ortho"), dim=IMAGE_DIMS)


def centered_fft2(field: torch.Tensor) -> torch.Tensor:
    """The spectrum of a field sampled around the optical axis, as Fourier-optics code writes
    it (Voelz's ``ft2``): ``fftshift(fft2(fftshift(u)))``, unnormalized."""
    return torch.fft.fftshift(torch.fft.fft2(torch.fft.fftshift(field, dim=IMAGE_DIMS)), dim=IMAGE_DIMS)


def centered_ifft2(spectrum: torch.Tensor) -> torch.Tensor:
    """The inverse of :func:`centered_fft2`: ``ifftshift(ifft2(ifftshift(U)))``."""
    return torch.fft.ifftshift(torch.fft.ifft2(torch.fft.ifftshift(spectrum, dim=IMAGE_DIMS)), dim=IMAGE_DIMS)


# --------------------------------------------------------------------------- multi-coil MRI
def coil_sensitivities(coils: int, size: int) -> torch.Tensor:
    """Smooth synthetic sensitivity maps ``(coils, size, size)``, complex64: coil ``c`` sits on
    a ring around the image at angle ``a_c``, its magnitude a Gaussian around it and its phase
    tilting with the position. The maps are normalized to a root-sum-of-squares of 1 at every
    pixel, ``sum_c |S_c|^2 = 1``, as ESPIRiT-estimated maps are."""
    grid = torch.linspace(-1, 1, size, dtype=torch.float64)
    y, x = torch.meshgrid(grid, grid, indexing="ij")
    angles = 2 * math.pi * torch.arange(coils, dtype=torch.float64) / coils
    cx, cy = (1.5 * torch.cos(angles)).view(-1, 1, 1), (1.5 * torch.sin(angles)).view(-1, 1, 1)
    magnitude = torch.exp(-((x - cx) ** 2 + (y - cy) ** 2) / 2)
    phase = angles.view(-1, 1, 1) + 0.5 * math.pi * (x * cx + y * cy)
    maps = torch.polar(magnitude, phase)
    rss = maps.abs().square().sum(0).sqrt()
    return (maps / rss).to(C64)


def cartesian_mask(size: int, acceleration: int = 4, center_fraction: float = 0.08) -> torch.Tensor:
    """A random Cartesian undersampling mask ``(1, size)`` over phase-encode columns, as fastMRI's
    random mask function draws it: every line of the fully sampled center, and each other line
    with the probability that keeps ``size / acceleration`` lines on average."""
    center = round(size * center_fraction)
    probability = (size / acceleration - center) / (size - center)
    mask = torch.rand(size) < probability
    start = (size - center + 1) // 2
    mask[start:start + center] = True
    return mask.float().unsqueeze(0)


class MultiCoilMRI(nn.Module):
    """The multi-coil Cartesian MRI operator ``A x = M * fft2c(S * x)`` per coil, for an image
    ``x (H, W)``, sensitivity maps ``S (C, H, W)`` and a sampling mask ``M`` of k-space columns;
    its adjoint ``A^H y = sum_c conj(S_c) * ifft2c(M * y_c)`` (the mask is real and idempotent,
    the FFT unitary). This is the SENSE model behind fastMRI's and DeepInverse's multi-coil
    physics."""

    def __init__(self, maps: torch.Tensor, mask: torch.Tensor):
        super().__init__()
        self.register_buffer("maps", maps)
        self.register_buffer("mask", mask)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.mask * fft2c(self.maps * image.unsqueeze(-3))

    def adjoint(self, kspace: torch.Tensor) -> torch.Tensor:
        return (self.maps.conj() * ifft2c(self.mask * kspace)).sum(-3)


class MRIForwardAdjoint(nn.Module):
    """``(A x, A^H y)``: the two operator applications every reconstruction method is built on."""

    def __init__(self, physics: MultiCoilMRI):
        super().__init__()
        self.physics = physics

    def forward(self, image: torch.Tensor, kspace: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.physics(image), self.physics.adjoint(kspace)


class UnrolledGradientStep(nn.Module):
    """One gradient step on the data-consistency term of an unrolled reconstruction with a
    learned step size ``t``, ``x1 = x - t * A^H (A x - y)``, and the data-consistency loss
    after it, ``||A x1 - y||^2``: its backward passes through A, A^H, A and their adjoints."""

    def __init__(self, physics: MultiCoilMRI, step: float = 0.5):
        super().__init__()
        self.physics = physics
        self.step = nn.Parameter(torch.tensor(step))

    def forward(self, image: torch.Tensor, kspace: torch.Tensor) -> torch.Tensor:
        updated = image - self.step * self.physics.adjoint(self.physics(image) - kspace)
        return (self.physics(updated) - kspace).abs().square().sum()


def build_mri(coils: int, size: int, train: bool, noise: float = 0.01):
    """A ``size x size`` image, ``coils`` maps, 4x undersampled k-space of a random image with
    complex Gaussian noise; for training, an initial image that requires grad."""
    physics = MultiCoilMRI(coil_sensitivities(coils, size), cartesian_mask(size))
    truth = torch.randn(size, size, dtype=C64)
    kspace = physics.mask * (physics(truth) + noise * torch.randn(coils, size, size, dtype=C64))
    image = torch.randn(size, size, dtype=C64, requires_grad=train)
    if not train:
        return MRIForwardAdjoint(physics), (image, kspace)
    return UnrolledGradientStep(physics), (image, kspace)


# --------------------------------------------------------------------------- angular spectrum
def angular_spectrum_transfer_function(size: int, pixel_pitch: float, wavelength: float,
                                       distance: float) -> torch.Tensor:
    """The free-space transfer function over a distance ``z`` on the centered (fftshift-ed)
    frequency grid of a ``size x size`` field, complex64:
    ``H(fx, fy) = exp(i 2 pi z sqrt(1/lambda^2 - fx^2 - fy^2))`` where the root is real, 0 for
    the evanescent waves. The phase ``2 pi z / lambda`` runs to ~10^6 radians, where float32's
    spacing is 0.06 radian: it is computed in float64 and rounded once, to the complex64 result."""
    freqs = torch.fft.fftshift(torch.fft.fftfreq(size, d=pixel_pitch, dtype=torch.float64))
    fy, fx = torch.meshgrid(freqs, freqs, indexing="ij")
    squared = 1 / wavelength**2 - fx**2 - fy**2
    propagating = squared > 0
    phase = 2 * math.pi * distance * torch.sqrt(squared.clamp(min=0))
    transfer = torch.polar(propagating.double(), phase)  # modulus 0 zeroes the evanescent waves
    return transfer.to(C64)


class AngularSpectrumPropagation(nn.Module):
    """Propagation of a sampled scalar field over a fixed distance by the angular-spectrum
    method: ``u_z = ift2(ft2(u) * H)`` with the centered transforms of Fourier-optics code."""

    def __init__(self, size: int, pixel_pitch: float, wavelength: float, distance: float):
        super().__init__()
        self.register_buffer("transfer", angular_spectrum_transfer_function(size, pixel_pitch, wavelength, distance))

    def forward(self, field: torch.Tensor) -> torch.Tensor:
        return centered_ifft2(centered_fft2(field) * self.transfer)


class PhaseMaskIntensity(nn.Module):
    """A learnable phase mask (a spatial light modulator, a diffractive element) on an
    illumination of amplitude ``a``: the field ``u = a * exp(i phase)`` propagates a distance
    ``z``, and the sensor reads its intensity ``|u_z|^2``."""

    def __init__(self, size: int, pixel_pitch: float, wavelength: float, distance: float):
        super().__init__()
        self.phase = nn.Parameter(2 * math.pi * torch.rand(size, size))
        self.propagate = AngularSpectrumPropagation(size, pixel_pitch, wavelength, distance)

    def forward(self, amplitude: torch.Tensor) -> torch.Tensor:
        field = amplitude * torch.exp(1j * self.phase)
        return self.propagate(field).abs().square()


class _IntensityLoss(nn.Module):
    """The phase-retrieval / holography objective: MSE of the intensity to a target pattern."""

    def __init__(self, model: PhaseMaskIntensity):
        super().__init__()
        self.model = model

    def forward(self, amplitude: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(self.model(amplitude), target)


def circular_aperture(size: int, radius_fraction: float = 0.25) -> torch.Tensor:
    """A plane wave through a circular aperture of radius ``radius_fraction * size`` pixels."""
    grid = torch.arange(size, dtype=torch.float32) - size / 2
    y, x = torch.meshgrid(grid, grid, indexing="ij")
    return ((x**2 + y**2) <= (radius_fraction * size) ** 2).float()


def build_angular_spectrum(size: int, pixel_pitch: float, wavelength: float, distance: float, train: bool):
    """A ``size x size`` phase mask lit through a circular aperture; for training, a random
    target intensity of the same mean as the aperture's."""
    model = PhaseMaskIntensity(size, pixel_pitch, wavelength, distance)
    amplitude = circular_aperture(size)
    if not train:
        return model, (amplitude,)
    target = 2 * amplitude.mean() * torch.rand(size, size)
    return _IntensityLoss(model), (amplitude, target)
