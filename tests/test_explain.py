"""realify.explain: the complex ops of each graph and their rules, eager islands, graph breaks,
real op counts, without compiling."""

import pytest
import torch
from no_rule_ops import PHASE_TWIST, phase_twist

import realify

C64 = torch.complex64


def _with_break_and_island(z, w):
    y = torch.fft.fft(z) * w
    print("a graph break")
    return phase_twist(y.reshape(2, 2)).abs().sum() + y.abs().sum()  # a user's custom op: an island


def _line(offset: int) -> str:
    """``test_explain.py:N`` for the line ``offset`` lines below ``_with_break_and_island``'s def."""
    return f"test_explain.py:{_with_break_and_island.__code__.co_firstlineno + offset}"


def test_explain_lists_ops_rules_islands_and_graph_breaks(fresh_dynamo, capsys):
    z, w = torch.randn(4, dtype=C64), torch.randn(4, dtype=C64)
    report = realify.explain(_with_break_and_island, z, w)
    assert len(report.graphs) == 2 and len(report.graph_breaks) == 1
    first, second = report.graphs
    assert {op.op: op.rule for op in first.complex_ops} == {
        "aten._fft_c2c.default": "realify.rules.fft.fft_c2c", "aten.mul.Tensor": "realify.rules.arithmetic.mul"}
    assert all(op.where and _line(1) in op.where for op in first.complex_ops)
    # the real graph realify makes of the first: one FFT on pairs, the complex product in real muls
    assert first.real_ops["realify.fft_c2c.default"] == 1 and first.real_ops["aten.mul.Tensor"] == 4
    assert set(report.islands) == {PHASE_TWIST}
    island = next(op for op in second.complex_ops if op.op == PHASE_TWIST)
    assert island.rule is None and _line(3) in island.where
    assert second.real_ops["realify.eager_island.default"] == 1
    brk = report.graph_breaks[0]
    assert _line(2) in brk.where and "print" in brk.where and brk.reason
    text = str(report)
    assert "EAGER ISLAND" in text and "graph break 1" in text and "realify.rules.fft.fft_c2c" in text
    # nothing compiled, no island warning (the report lists them), and the program ran once
    assert capsys.readouterr().out.count("a graph break") == 1


class _SpectralBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(3, 3, 4, dtype=C64))

    def forward(self, x):
        spectrum = torch.fft.rfft(x)[..., :4]
        return torch.fft.irfft(torch.einsum("bim,iom->bom", spectrum, self.weight), n=x.shape[-1])


def test_explain_a_module_with_real_inputs_that_makes_complex_values(fresh_dynamo):
    report = realify.explain(_SpectralBlock(), torch.randn(2, 3, 16))
    assert len(report.graphs) == 1 and not report.graph_breaks and not report.islands
    ops = {op.op: op.rule for op in report.graphs[0].complex_ops}
    assert ops["aten.bmm.default"] == "realify.rules.linalg._product_rule (made per op)"
    assert all(rule for rule in ops.values())
    real = report.graphs[0].real_ops
    assert real["aten.bmm.default"] == 3  # Gauss's form (gemm_multiplications=3)


def test_explain_a_real_program(fresh_dynamo):
    report = realify.explain(lambda x: x.exp() + 1, torch.randn(3))
    assert [g.complex_ops for g in report.graphs] == [[]] and not report.islands


def test_torch_logs_shows_realifys_log(tmp_path):
    """TORCH_LOGS="+realify" configures realify's logger as torch's own (torch reads the
    variable at its import, before realify registers its log)."""
    import os
    import subprocess
    import sys

    program = (
        "import sys, torch, realify\n"
        f"sys.path.insert(0, {os.path.dirname(__file__)!r})\n"
        "from no_rule_ops import phase_twist\n"  # an op with no rule: its island is logged
        "f = realify.compile(lambda z: phase_twist(z).abs(), inner='eager')\n"
        "f(torch.randn(3, 3, dtype=torch.complex64))\n"
    )
    env = {**os.environ, "TORCH_LOGS": "+realify"}
    done = subprocess.run([sys.executable, "-c", program], cwd=tmp_path, env=env, capture_output=True, text=True,
                          check=False, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    logged = [line for line in done.stderr.splitlines() if "eager island" in line and PHASE_TWIST in line]
    assert logged, done.stderr[-2000:]
    # torch's format (level letter, time, process, file:line), once, not the plain logging prefix
    assert not any(line.startswith("WARNING:realify:") for line in done.stderr.splitlines())


def test_a_known_third_party_break_says_how_to_keep_one_graph(fresh_dynamo):
    models = pytest.importorskip("neuralop.models", reason="neuraloperator comes with the models extra")
    tensorly_plugins = pytest.importorskip("tensorly.plugins")
    opt_einsum = pytest.importorskip("opt_einsum")
    tensorly_plugins.use_opt_einsum("optimal")  # what importing neuraloperator sets
    fno = models.FNO(n_modes=(4, 4), hidden_channels=4, n_layers=1, in_channels=1, out_channels=1)
    # realify's stand-ins keep opt_einsum's contractions in the graph (test_library_polyfills);
    # inside opt_einsum's sharing context they leave the call to opt_einsum, which breaks it
    assert len(realify.explain(fno, torch.randn(1, 1, 8, 8)).graphs) == 1
    torch._dynamo.reset()
    with opt_einsum.shared_intermediates():
        report = realify.explain(fno, torch.randn(1, 1, 8, 8))
    assert report.graph_breaks, "opt_einsum no longer breaks the graph when sharing: drop its entry in KNOWN_BREAKS"
    assert all(b.advice and "tensorly.plugins.use_default_einsum()" in b.advice for b in report.graph_breaks)
    assert "to keep one graph: opt_einsum's contract" in str(report)
    # what the advice says holds: one graph
    tensorly_plugins.use_default_einsum()
    try:
        torch._dynamo.reset()
        with opt_einsum.shared_intermediates():
            advised = realify.explain(fno, torch.randn(1, 1, 8, 8))
    finally:
        tensorly_plugins.use_opt_einsum("optimal")
    assert len(advised.graphs) == 1 and not advised.graph_breaks
    # a break of the program's own (print) gets no advice
    assert realify.explain(_with_break_and_island, torch.randn(4, dtype=C64), torch.randn(4, dtype=C64)
                           ).graph_breaks[0].advice is None
