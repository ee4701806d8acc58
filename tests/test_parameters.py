"""realify.complex_parameters_as_real: complex parameters stored as real (..., 2) pairs."""

import pytest
import torch
import torch.nn as nn

import realify


class _Mixed(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(3, 4, dtype=torch.complex64))
        self.linear = nn.Linear(4, 4)
        self.inner = nn.Module()
        self.inner.phase = nn.Parameter(torch.randn(4, dtype=torch.complex64))

    def forward(self, x):
        z = torch.fft.fft(self.linear(x)) * self.inner.phase
        return (z @ self.weight.T).abs()


def _train(model, steps=3, compiled=False):
    torch.manual_seed(1)
    step = realify.compile(model, inner="eager") if compiled else model
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    losses = []
    for _ in range(steps):
        loss = step(torch.randn(5, 4)).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "realify"])
def test_real_pairs_compute_and_train_as_the_complex_parameters_did(fresh_dynamo, compiled):
    torch.manual_seed(0)
    reference = _Mixed()
    torch.manual_seed(0)
    pairs = realify.complex_parameters_as_real(_Mixed())
    assert all(not p.is_complex() for p in pairs.parameters())
    assert pairs.parametrizations.weight.original0.shape == (3, 4, 2)
    assert pairs.weight.dtype == torch.complex64 and torch.equal(pairs.weight, reference.weight)
    assert torch.equal(pairs.inner.phase, reference.inner.phase)
    # Adam on the pairs is Adam on the complex values: the same losses, the same parameters
    torch.testing.assert_close(_train(pairs, compiled=compiled), _train(reference), rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(pairs.weight, reference.weight, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(pairs.inner.phase, reference.inner.phase, rtol=1e-6, atol=1e-7)


def test_a_parametrized_complex_parameter_is_refused_by_name():
    model = _Mixed()
    torch.nn.utils.parametrize.register_parametrization(model.inner, "phase", _Conj())
    with pytest.raises(ValueError, match=r"complex_parameters_as_real: inner\.phase is already parametrized"):
        realify.complex_parameters_as_real(model)


class _Conj(nn.Module):
    def forward(self, z):
        return z.conj()
