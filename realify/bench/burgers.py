"""Mixed precision on a real task: learn the solution operator of Burgers' equation with
neuraloperator's FNO, in float32 and with complex mixed precision, and compare test errors.

    python -m realify.bench.burgers [--steps 300] [--modes realify,realify-amp]

The data is made here, by a reference solver: ``u_t + u u_x = nu u_xx`` on the periodic
interval ``[0, 2 pi)``, random smooth initial conditions ``u0`` (a Gaussian random field),
the solution ``u(T)`` by a pseudo-spectral method in float64 (Fourier in space with 2/3
dealiasing, the diffusion integrated exactly by an integrating factor, RK4 in time on a fine
grid), both subsampled to the training grid. The model maps ``u0`` to ``u(T)``; the figure of
merit is the relative L2 error on held-out samples, after the same number of Adam steps from
the same initial weights and batches in each mode.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import time

import torch

from .runner import low_precision_unavailable
from .workloads import _package


# --------------------------------------------------------------------------- reference solver
def burgers(u0: torch.Tensor, *, nu: float, t_end: float, dt: float) -> torch.Tensor:
    """``u(t_end)`` for each row of ``u0`` (float64, periodic on ``[0, 2 pi)``): in Fourier
    space ``v = exp(nu k^2 t) u_hat`` obeys ``v' = exp(nu k^2 t) N(u)``, ``N(u) = -i k/2
    FFT(u^2)`` (dealiased: the top third of wavenumbers zeroed), integrated by RK4."""
    n = u0.shape[-1]
    k = torch.fft.rfftfreq(n, d=1.0 / n).to(torch.float64)
    keep = (k < n / 3).to(torch.complex128)
    steps = max(1, math.ceil(t_end / dt))
    h = t_end / steps
    decay = torch.exp(-nu * k**2 * h / 2)  # the integrating factor over half a step

    def nonlinear(u_hat: torch.Tensor) -> torch.Tensor:
        u = torch.fft.irfft(u_hat * keep, n=n)
        return -0.5j * k * torch.fft.rfft(u * u) * keep

    u_hat = torch.fft.rfft(u0.to(torch.float64))
    for _ in range(steps):
        a = h * nonlinear(u_hat)
        b = h * nonlinear(decay * (u_hat + a / 2))
        c = h * nonlinear(decay * u_hat + b / 2)
        d = h * nonlinear(decay**2 * u_hat + decay * c)
        u_hat = decay**2 * (u_hat + a / 6) + decay * (b + c) / 3 + d / 6
    return torch.fft.irfft(u_hat, n=n)


def random_fields(count: int, n: int, *, generator: torch.Generator, alpha: float = 2.5, tau: float = 7.0
                  ) -> torch.Tensor:
    """Gaussian random fields on ``n`` points with spectrum ``(k^2 + tau^2)^(-alpha)``
    (smooth, zero mean), scaled to unit standard deviation per sample."""
    k = torch.fft.rfftfreq(n, d=1.0 / n).to(torch.float64)
    amplitude = (k**2 + tau**2) ** (-alpha / 2)
    amplitude[0] = 0
    coefficients = torch.randn(count, k.numel(), dtype=torch.complex128, generator=generator) * amplitude
    fields = torch.fft.irfft(coefficients, n=n)
    return fields / fields.std(dim=-1, keepdim=True)


@dataclasses.dataclass
class Dataset:
    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor


def make_dataset(*, train: int = 800, test: int = 200, grid: int = 128, fine: int = 512, nu: float = 0.05,
                 t_end: float = 1.0, seed: int = 0) -> Dataset:
    """Initial conditions and solutions, float32, shaped (samples, 1, grid)."""
    generator = torch.Generator().manual_seed(seed)
    u0 = random_fields(train + test, fine, generator=generator)
    u1 = burgers(u0, nu=nu, t_end=t_end, dt=1.0 / fine)  # CFL: max|u| dt / dx < 0.5
    stride = fine // grid
    x, y = (u[:, None, ::stride].float() for u in (u0, u1))
    return Dataset(x[:train], y[:train], x[train:], y[train:])


# --------------------------------------------------------------------------- training
MODES = ("realify", "realify-amp")


def relative_l2(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return ((prediction - target).flatten(1).norm(dim=1) / target.flatten(1).norm(dim=1)).mean()


@dataclasses.dataclass
class Curve:
    mode: str
    steps: list[int]
    test_error: list[float]
    step_ms: float  # median wall time of a training step after the first (compiling) one


def train(data: Dataset, mode: str, *, steps: int, batch: int = 20, lr: float = 2e-3, evaluate_every: int = 50,
          seed: int = 0, modes: int = 16, hidden: int = 32) -> Curve:
    """neuraloperator's FNO trained ``steps`` Adam steps under ``mode`` ("realify": float32;
    "realify-amp": bfloat16 autocast with ``realify.config.complex_autocast``), from weights
    and batches fixed by ``seed``."""
    import realify

    fno = _package("neuralop.models", "neuraloperator")
    torch.manual_seed(seed)
    model = fno.FNO(n_modes=(modes,), hidden_channels=hidden, in_channels=1, out_channels=1, n_layers=4)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    # cosine decay to zero: the final error is that of a converged run, not of wherever a
    # constant step size's noise left it (at a constant rate it moves by +-20% between evaluations)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)
    compiled = realify.compile(model)
    mixed = mode == "realify-amp"
    order = torch.Generator().manual_seed(seed)
    curve = Curve(mode, [], [], 0.0)
    times = []
    with realify.config.patch(complex_autocast=mixed):
        for step in range(1, steps + 1):
            index = torch.randint(0, data.train_x.shape[0], (batch,), generator=order)
            start = time.perf_counter()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mixed):
                loss = relative_l2(compiled(data.train_x[index]).float(), data.train_y[index])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            times.append(time.perf_counter() - start)
            if step % evaluate_every == 0 or step == steps:
                with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=mixed):
                    error = relative_l2(compiled(data.test_x).float(), data.test_y).item()
                curve.steps.append(step)
                curve.test_error.append(error)
    curve.step_ms = statistics.median(times[1:] or times) * 1e3
    return curve


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m realify.bench.burgers", description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300, help="Adam steps per mode (default 300)")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--seed", type=int, default=0, help="data, weights and batch order (default 0)")
    args = parser.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        parser.error(f"unknown mode(s) {', '.join(unknown)}; modes are {', '.join(MODES)}")
    if "realify-amp" in modes and (reason := low_precision_unavailable("cpu")):
        print(f"note: {reason.rsplit('; set', 1)[0]}: step times of realify-amp are not representative")
    start = time.perf_counter()
    data = make_dataset(seed=args.seed)
    print(f"Burgers data: {data.train_x.shape[0]} train / {data.test_x.shape[0]} test samples "
          f"({time.perf_counter() - start:.1f} s)")
    curves = [train(data, mode, steps=args.steps, seed=args.seed) for mode in modes]
    print("step  " + "  ".join(f"{c.mode:>12}" for c in curves))
    for i, step in enumerate(curves[0].steps):
        print(f"{step:4d}  " + "  ".join(f"{c.test_error[i]:12.4f}" for c in curves))
    print("step ms " + "  ".join(f"{c.step_ms:10.1f}" for c in curves))
    if len(curves) == 2:
        first, second = (c.test_error[-1] for c in curves)
        print(f"final test error {curves[1].mode} / {curves[0].mode}: {second / first:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
