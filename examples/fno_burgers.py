"""Fourier neural operator on Burgers' equation: eager against realify

A one-dimensional Fourier neural operator learns the map from an initial condition ``u0`` to
the solution ``u(T)`` of the viscous Burgers equation ``u_t + u u_x = nu u_xx``. The data is
made here by realify's reference solver (``realify.bench.burgers``: pseudo-spectral in
float64, RK4 in time). The same model, from the same initial weights and batches, trains once
eagerly and once through ``torch.compile(backend="realify")``; the script plots both test-error
curves and the time per training step.
"""

import statistics
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch

import realify  # noqa: F401  (the "realify" backend is found by name; the import makes the dependency explicit)
from realify.bench.burgers import make_dataset, relative_l2

STEPS, BATCH, GRID = 120, 20, 64


class SpectralConv1d(torch.nn.Module):
    """Complex weights on the lowest ``modes`` Fourier modes of each channel pair."""

    def __init__(self, channels: int, modes: int):
        super().__init__()
        self.modes = modes
        scale = 1 / channels
        self.weight = torch.nn.Parameter(scale * torch.randn(channels, channels, modes, dtype=torch.cfloat))

    def forward(self, x):  # x: (batch, channels, n), real
        spectrum = torch.fft.rfft(x)[..., : self.modes]
        mixed = torch.einsum("bim,iom->bom", spectrum, self.weight)
        return torch.fft.irfft(mixed, n=x.shape[-1])


class FNO1d(torch.nn.Module):
    def __init__(self, channels: int = 24, modes: int = 12, layers: int = 3):
        super().__init__()
        self.lift = torch.nn.Conv1d(2, channels, 1)  # u0 and the grid coordinate
        self.spectral = torch.nn.ModuleList(SpectralConv1d(channels, modes) for _ in range(layers))
        self.pointwise = torch.nn.ModuleList(torch.nn.Conv1d(channels, channels, 1) for _ in range(layers))
        self.project = torch.nn.Sequential(torch.nn.Conv1d(channels, 64, 1), torch.nn.GELU(), torch.nn.Conv1d(64, 1, 1))

    def forward(self, u0):  # u0: (batch, 1, n)
        grid = torch.linspace(0, 1, u0.shape[-1]).expand_as(u0)
        x = self.lift(torch.cat([u0, grid], dim=1))
        for spectral, pointwise in zip(self.spectral, self.pointwise, strict=True):
            x = torch.nn.functional.gelu(spectral(x) + pointwise(x))
        return self.project(x)


def train(data, compiled: bool):
    torch.manual_seed(0)
    model = FNO1d()
    step_model = torch.compile(model, backend="realify") if compiled else model
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    order = torch.Generator().manual_seed(0)
    errors, times = [], []
    for step in range(1, STEPS + 1):
        index = torch.randint(0, data.train_x.shape[0], (BATCH,), generator=order)
        start = time.perf_counter()
        loss = relative_l2(step_model(data.train_x[index]), data.train_y[index])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - start)
        if step % 10 == 0:
            with torch.no_grad():  # the test error, eagerly: the compiled step is for training
                errors.append((step, relative_l2(model(data.test_x), data.test_y).item()))
    return errors, times


data = make_dataset(train=256, test=64, grid=GRID, fine=128)
results = {}
for name, compiled in (("eager", False), ("realify", True)):
    errors, times = train(data, compiled)
    # the first step compiles (realify) or warms up allocations (eager): reported apart
    results[name] = errors, times
    print(f"{name:8s} first step {times[0]:6.2f} s, then median {statistics.median(times[1:]) * 1e3:6.2f} ms/step, "
          f"test error after {STEPS} steps {errors[-1][1]:.4f}")

speedup = statistics.median(results["eager"][1][1:]) / statistics.median(results["realify"][1][1:])
print(f"realify vs eager, per training step: {speedup:.2f}x")

figure, (curves, bars) = plt.subplots(1, 2, figsize=(10, 3.8), gridspec_kw={"width_ratios": [2, 1]})
for name, (errors, _) in results.items():
    steps, values = zip(*errors, strict=True)
    curves.plot(steps, values, marker="o", markersize=3, label=name)
curves.set_yscale("log")
curves.set_xlabel("Adam step")
curves.set_ylabel("relative L2 test error")
curves.set_title("Burgers' equation, u0 -> u(1), 64 points")
curves.legend()
names = list(results)
bars.bar(names, [statistics.median(results[n][1][1:]) * 1e3 for n in names], color=["tab:blue", "tab:orange"])
bars.set_ylabel("median ms per training step")
bars.set_title("time per step (after the first)")
figure.tight_layout()
figure.savefig("fno_burgers.png", dpi=110)
