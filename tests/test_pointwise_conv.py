"""1x1 convolutions on CPU as batched matrix products (realify/passes/pointwise_conv.py): values and
gradients against eager's convolution, special values included, and which convolutions the
decomposition takes (forward and backward) and which it leaves to ATen."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from functorch.compile import make_boxed_func
from torch._functorch.aot_autograd import aot_function

from realify.inductor import realify_decomposition_table

aten = torch.ops.aten


def _special(x: torch.Tensor) -> torch.Tensor:
    """``x`` with inf, -inf, nan and -0.0 at fixed places of its first batch element."""
    x = x.clone()
    flat = x[0].view(-1)
    flat[:4] = torch.tensor([float("inf"), float("-inf"), float("nan"), -0.0])
    return x


CASES = [
    ("conv1d with bias", lambda: nn.Conv1d(6, 4, 1), (3, 6, 10), torch.float32),
    ("conv2d without bias", lambda: nn.Conv2d(6, 5, 1, bias=False), (2, 6, 4, 5), torch.float32),
    ("conv3d float64", lambda: nn.Conv3d(3, 4, 1), (2, 3, 2, 3, 4), torch.float64),
    ("weight a strided slice", lambda: _sliced_weight(nn.Conv2d(6, 4, 1)), (2, 6, 3, 3), torch.float32),
]


def _sliced_weight(conv: nn.Conv2d) -> nn.Conv2d:
    """``conv`` with a strided weight (every other input channel of a wider one)."""
    conv.weight = nn.Parameter(torch.randn(conv.out_channels, 2 * conv.in_channels, 1, 1)[:, ::2])
    return conv


@pytest.mark.parametrize("special", [False, True])
@pytest.mark.parametrize("name,make,shape,dtype", CASES, ids=[c[0] for c in CASES])
def test_pointwise_convolutions_match_eager(fresh_dynamo, name, make, shape, dtype, special):
    torch.manual_seed(0)
    conv = make().to(dtype)
    x = torch.randn(shape, dtype=dtype)
    if special:
        x = _special(x)
    g = torch.randn(conv(x).shape, dtype=dtype)

    def run(fn):
        xi = x.clone().requires_grad_()
        conv.zero_grad(set_to_none=True)
        y = fn(xi)
        y.backward(g.nan_to_num(0.0))
        return [y, xi.grad, *(p.grad for p in conv.parameters())]

    expected = run(conv)
    actual = run(torch.compile(conv, backend="realify"))
    tolerance = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 1e-12, "atol": 1e-12}
    for a, e in zip(actual, expected):
        assert torch.equal(a.isnan(), e.isnan()) and torch.equal(a.isinf(), e.isinf())
        finite = e.isfinite()
        torch.testing.assert_close(a[finite], e[finite], **tolerance)


def _graphs(module: nn.Module, x: torch.Tensor) -> tuple[set, set]:
    """The aten ops of the forward and backward graphs AOTAutograd traces with realify's
    decompositions for ``module`` on ``x``."""
    graphs = []

    def keep(gm, example_inputs):
        graphs.append(gm)
        return make_boxed_func(gm)

    params = list(module.parameters())
    fn = aot_function(lambda x, *ps: torch.func.functional_call(module, dict(zip(
        [n for n, _ in module.named_parameters()], ps)), (x,)), fw_compiler=keep, bw_compiler=keep,
        decompositions=realify_decomposition_table())
    fn(x.requires_grad_(), *params).sum().backward()
    forward, backward = ({n.target for n in gm.graph.nodes if n.op == "call_function"} for gm in graphs)
    return forward, backward


def test_pointwise_convolution_runs_as_bmm_forward_and_backward():
    forward, backward = _graphs(nn.Conv2d(8, 4, 1), torch.randn(2, 8, 5, 5))
    assert aten.bmm.default in forward and aten.convolution.default not in forward
    assert aten.bmm.default in backward and aten.convolution_backward.default not in backward


@pytest.mark.parametrize("name,module,x", [
    ("3x3 kernel", nn.Conv2d(4, 4, 3), torch.randn(2, 4, 6, 6)),
    ("stride 2", nn.Conv2d(4, 4, 1, stride=2), torch.randn(2, 4, 6, 6)),
    ("padding", nn.Conv1d(4, 4, 1, padding=1), torch.randn(2, 4, 6)),
    ("two groups", nn.Conv2d(4, 4, 1, groups=2), torch.randn(2, 4, 6, 6)),
    ("transposed", nn.ConvTranspose2d(4, 4, 1), torch.randn(2, 4, 6, 6)),
    ("channels last", nn.Conv2d(4, 4, 1), torch.randn(2, 4, 6, 6).to(memory_format=torch.channels_last)),
])
def test_other_convolutions_stay_aten(name, module, x):
    forward, backward = _graphs(module, x)
    assert aten.convolution.default in forward and aten.bmm.default not in forward
    assert aten.convolution_backward.default in backward
