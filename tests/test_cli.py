"""``python -m realify bench/demo/coverage`` and the benchmark runner, on tiny shapes.

Inductor code generation takes minutes on a shared 2-core machine, so these tests use the
hidden fast modes (``realify-eager``: realify's real graph run without Inductor) and the
hidden ``--size tiny``; the code paths (timing, correctness check, JSON, plot) are the same.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest
import torch

from realify.bench import overhead, report, runner, workloads
from realify.tools import cli

FAST = "eager,realify-eager"


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_runner_rows_are_timed_and_checked_against_eager():
    rows = runner.run(runner.select(["docs-chain"]), size="tiny", modes=FAST.split(","), repeat=3, progress=False)
    assert [(r.workload, r.variant, r.mode) for r in rows] == [
        ("docs-chain", "fwd", "eager"), ("docs-chain", "fwd", "realify-eager")]
    eager, real = rows
    assert eager.status == "ok" and eager.max_rel_err is None and eager.speedup == pytest.approx(1.0)
    assert real.status == "ok", real.status_text()
    assert real.max_rel_err is not None and real.max_rel_err <= real.rtol
    assert real.graphs == 1 and real.graph_breaks == 0
    assert real.repeat == 3 and 0 < real.min_ms <= real.median_ms <= real.max_ms
    assert real.compile_s > 0 and real.eager_paired_ms > 0 and eager.eager_paired_ms is None
    assert real.speedup == pytest.approx(real.eager_paired_ms / real.median_ms)
    table = report.format_table(rows)
    assert "docs-chain fwd" in table and "realify-eager" in table and "max rel err" in table


def test_bench_cli_only_train_json_and_plot(tmp_path, capsys):
    out_json, out_png = tmp_path / "bench.json", tmp_path / "bench.png"
    rc = cli.main(["bench", "--size", "tiny", "--only", "rotary", "--train", "--modes", FAST, "--repeat", "2",
                   "--warmup", "1", "--json", str(out_json), "--plot", str(out_png), "--no-progress"])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "rotary train" in printed and "docs-chain" not in printed
    data = json.loads(out_json.read_text())
    assert data["size"] == "tiny" and data["machine"]["cores"] >= 1
    rows = data["rows"]
    assert {(r["workload"], r["variant"], r["mode"]) for r in rows} == {
        ("rotary", v, m) for v in ("fwd", "train") for m in FAST.split(",")}
    for r in rows:
        assert r["status"] == "ok", r
        assert r["median_ms"] > 0
        if r["mode"] != "eager":
            assert r["max_rel_err"] <= r["rtol"]
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [r.to_dict() for r in report.read_json(str(out_json))] == rows  # to plot a run again


def test_only_filters_and_rejects_unknown_names(capsys):
    assert [c.workload.name for c in runner.select(["gemm-256, fno"])] == ["gemm-256", "fno"]
    assert [(c.workload.name, c.train) for c in runner.select(["gemm-256,fno"], train=True)] == [
        ("gemm-256", False), ("fno", False), ("fno", True)]
    assert cli.main(["bench", "--only", "no-such-workload", "--no-progress"]) == 2
    assert "no-such-workload" in capsys.readouterr().err


def test_gemm_only_mode_runs_only_on_gemm_workloads():
    names = [m.name for m in runner.modes_for(runner.Case(workloads.get("docs-chain"), False), runner.DEFAULT_MODES)]
    assert "realify-4m" not in names and "realify" in names and "complex-wrapper" in names
    names = [m.name for m in runner.modes_for(runner.Case(workloads.get("gemm-512"), False), runner.DEFAULT_MODES)]
    assert "realify-4m" in names


def _with_mode(monkeypatch, mode):
    monkeypatch.setitem(runner.MODES, mode.name, mode)
    return runner.run(runner.select(["gemm-256"]), size="tiny", modes=["eager", mode.name], repeat=1, warmup=0,
                      progress=False)[1]


def test_failing_mode_is_a_failed_row_with_a_one_line_reason(monkeypatch):
    def wrap(fn):
        def broken(*args):
            raise RuntimeError("no rule for aten.frobnicate\nsecond line")
        return broken

    row = _with_mode(monkeypatch, runner.Mode("broken", "raises", "a test mode", wrap, compiled=False))
    assert row.status == "failed" and row.error == "RuntimeError: no rule for aten.frobnicate"
    assert row.median_ms is None and "FAILED" in report.format_table([row])


def test_wrong_result_is_flagged(monkeypatch):
    off = runner.Mode("off", "1% off", "a test mode", lambda fn: lambda *a: fn(*a) * 1.01, compiled=False)
    row = _with_mode(monkeypatch, off)
    assert row.status == "wrong" and row.max_rel_err == pytest.approx(0.01, rel=1e-3)
    assert row.status_text().startswith("WRONG")


def test_compiled_mode_without_a_graph_is_a_failure(monkeypatch):
    row = _with_mode(monkeypatch, runner.Mode("fake-compile", "runs eagerly", "a test mode", lambda fn: fn))
    assert row.status == "failed" and "no graph was compiled" in row.error


def test_max_rel_err():
    a = torch.tensor([1.0, 2.0, float("nan")])
    assert runner.max_rel_err(a, a.clone()) == 0.0
    assert runner.max_rel_err(a * 1.5, a) == pytest.approx(0.5)
    assert runner.max_rel_err(torch.zeros(3), a) == float("inf")  # nan where the reference has none
    z = torch.tensor([1 + 1j, 2j])
    assert runner.max_rel_err((z + 0.02j,), (z,)) == pytest.approx(0.01)


def _installed(w: workloads.Workload) -> None:
    """Skip, naming the package, where a third-party workload's package is missing (the
    default venv installs the "models" extra: make test)."""
    if w.third_party is not None:
        try:
            w.make("tiny", False, seed=0)
        except workloads.WorkloadUnavailable as e:
            pytest.skip(str(e))


@pytest.mark.parametrize("name", workloads.names())
def test_workloads_are_deterministic_and_differentiable(name):
    w = workloads.get(name)
    _installed(w)
    for train in (False, True) if w.trainable else (False,):
        fn1, inputs1 = w.make("tiny", train, seed=3)
        fn2, inputs2 = w.make("tiny", train, seed=3)
        out1, out2 = fn1(*inputs1), fn2(*inputs2)
        assert runner.max_rel_err(out1, out2) == 0.0
        if train:
            assert out1.dim() == 0 and not out1.dtype.is_complex
            out1.backward()


THIRD_PARTY = [w.name for w in workloads.WORKLOADS.values() if w.third_party]


@pytest.mark.parametrize("name", THIRD_PARTY)
def test_third_party_models_match_eager_through_realify(name):
    """The real packages' models (neuraloperator's FNO with opt_einsum's contractions, complextorch's
    layers, auraloss's STFT loss) through realify's real graphs: outputs, and the loss and
    every gradient of a training step, against eager PyTorch."""
    w = workloads.get(name)
    _installed(w)
    rows = runner.run(runner.select([name], train=True), size="tiny", modes=FAST.split(","), repeat=1, warmup=0,
                      progress=False)
    for row in rows:
        assert row.status == "ok", (row.label, row.mode, row.status_text())
    assert {(r.variant, r.mode) for r in rows} == {(v, m) for v in ("fwd", "train") for m in FAST.split(",")}


def test_missing_package_is_a_skipped_row_that_says_what_to_install(monkeypatch, capsys):
    def unavailable(**_):
        raise workloads.WorkloadUnavailable("neuraloperator is not installed: pip install 'realify[models]'")

    w = workloads.get("neuralop-fno")
    monkeypatch.setitem(workloads.WORKLOADS, w.name, dataclasses.replace(w, builder=unavailable))
    rows = runner.run(runner.select(["neuralop-fno"]), size="tiny", modes=FAST.split(","), repeat=1, progress=False)
    assert [r.status for r in rows] == ["skipped", "skipped"]
    cli._explain_problems(rows)
    printed = capsys.readouterr().out
    assert ("neuralop-fno fwd, realify-eager: skipped: neuraloperator is not installed: "
            "pip install 'realify[models]'") in printed


def test_failure_reasons_are_printed_whole_and_say_whose_failure(monkeypatch, capsys):
    long = "shape '[1048576, 2]' is invalid for input of size 1048576 " + "x" * 200

    def wrap(fn):
        def broken(*args):
            raise RuntimeError(long)
        return broken

    row = _with_mode(monkeypatch, runner.Mode("broken", "raises", "PyTorch's experimental complex wrapper", wrap,
                                              compiled=False))
    assert "…" in report.format_table([row])  # the table's column is cut short
    cli._explain_problems([row])
    printed = capsys.readouterr().out
    assert f"gemm-256 fwd, broken: failed in PyTorch's experimental complex wrapper: RuntimeError: {long}" in printed


def test_coverage_slot(monkeypatch, capsys):
    monkeypatch.setattr(cli.importlib.util, "find_spec", lambda name: None)
    assert cli.main(["coverage"]) == 2
    assert "missing" in capsys.readouterr().err


def test_coverage_options_reach_its_own_parser(monkeypatch):
    seen = []
    fake = type(sys)("realify.tools.coverage")
    fake.main = lambda argv: seen.append(argv) or 0
    monkeypatch.setattr(cli.importlib, "import_module", lambda name: fake)
    assert cli.main(["coverage", "--out", "x.md", "--only", "abs"]) == 0
    assert seen == [["--out", "x.md", "--only", "abs"]]


def test_python_dash_m_entry_point():
    done = subprocess.run([sys.executable, "-m", "realify", "bench", "--help"], capture_output=True, text=True,
                          check=False, timeout=120)
    assert done.returncode == 0 and "--only" in done.stdout and "tiny" not in done.stdout


def test_version_and_every_demo_option_is_described(capsys):
    import realify

    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith(f"realify {realify.__version__} (torch {torch.__version__}")
    commands = cli._parser()._subparsers._group_actions[0].choices
    for action in commands["demo"]._actions:
        assert action.help, f"demo {action.option_strings} has no description"


def test_demo_runs_every_example_and_its_ratios_add_up(capsys):
    # the README's main command, on tiny shapes with Inductor: every example matches eager, and
    # each printed speedup is the printed eager time over the printed realify time
    import re

    torch._dynamo.reset()
    assert cli.main(["demo", "--size", "tiny", "--repeat", "3", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert f"{len(runner.DEMO)}/{len(runner.DEMO)} examples correct" in out, out
    lines = re.findall(r"eager ([\d.]+) ms, realify ([\d.]+) ms \(([\d.]+)x\)", out)
    assert len(lines) == len(runner.DEMO), out
    for eager_ms, realify_ms, speedup in lines:
        # every printed number is rounded to 2 decimals: the ratio of the true times lies
        # within what the rounded ones allow
        e, r, q = float(eager_ms), float(realify_ms), float(speedup)
        assert (e - 0.005) / (r + 0.005) - 0.005 <= q <= (e + 0.005) / max(r - 0.005, 1e-9) + 0.005, out


def test_mixed_precision_mode_lowers_complex_products_and_is_checked_against_eager(monkeypatch):
    """realify-amp (fast variant: realify's real graph without Inductor) runs each call under
    bfloat16 autocast with complex_autocast on: its result differs from eager's float32 one
    by bfloat16 roundoff (more than float32's, within the mode's tolerance), and the paired
    eager calls stay plain float32 eager."""
    amp = dataclasses.replace(runner.MODES["realify-amp"], name="realify-amp-eager", wrap=runner._realify("eager"))
    monkeypatch.setattr(runner, "low_precision_unavailable", lambda device: None)
    row = _with_mode(monkeypatch, amp)
    assert row.status == "ok", row.status_text()
    assert 1e-5 < row.max_rel_err <= row.rtol == 0.1


def test_mixed_precision_mode_is_skipped_with_the_reason_where_bfloat16_gemms_are_slow(monkeypatch):
    monkeypatch.setattr(runner, "low_precision_unavailable",
                        lambda device: "this CPU has no bfloat16 GEMM instructions")
    row = _with_mode(monkeypatch, runner.MODES["realify-amp"])
    assert row.status == "skipped" and "bfloat16 GEMM instructions" in row.status_text()
    names = [m.name for m in runner.modes_for(runner.Case(workloads.get("docs-chain"), False), runner.DEFAULT_MODES)]
    assert "realify-amp" not in names  # only where complex products are


def test_burgers_reference_solver():
    """The Burgers data of the mixed-precision study: a small-amplitude mode decays as the heat
    equation's (the nonlinear term is of second order in the amplitude), and a solution agrees
    with one on a 2x finer grid with 4x smaller steps (on the study's fine grid: 512 points)."""
    import math

    from realify.bench.burgers import burgers, random_fields

    n, nu = 128, 0.05
    x = torch.arange(n, dtype=torch.float64) * 2 * math.pi / n
    small = 1e-8 * torch.sin(3 * x)[None]
    decayed = burgers(small, nu=nu, t_end=1.0, dt=1 / n)
    assert ((decayed - small * math.exp(-nu * 9)).abs().max() / 1e-8) < 1e-6
    n = 512
    u0 = random_fields(3, n, generator=torch.Generator().manual_seed(0))
    coarse = burgers(u0, nu=nu, t_end=0.25, dt=1 / n)
    fine = burgers(torch.fft.irfft(torch.fft.rfft(u0), n=2 * n) * 2, nu=nu, t_end=0.25, dt=1 / (4 * n))[:, ::2]
    assert (coarse - fine).norm() / fine.norm() < 1e-6
    assert (coarse - u0).norm() / u0.norm() > 0.1  # and the solution did move


def test_compile_time_measures_first_calls_in_fresh_processes(monkeypatch):
    """The compile-time study's bookkeeping: each mode gets a cold and a warm first call per
    trial, the warm one in the cache directory its cold one filled (the processes are faked
    here: a real run takes minutes)."""
    from realify.bench import compile_time

    calls = []

    def first_call_s(mode, cache_dir, size):
        calls.append((mode, cache_dir))
        first = 10.0 if not any(c == (mode, cache_dir) for c in calls[:-1]) else 2.0
        return {"import": 0.5, "compile": 1.0, "first call": first}

    monkeypatch.setattr(compile_time, "first_call_s", first_call_s)
    times = compile_time.measure(2, 16)
    assert {m: {k: [run["first call"] for run in runs] for k, runs in kinds.items()} for m, kinds in times.items()} == {
        m: {"cold": [10.0, 10.0], "warm": [2.0, 2.0]} for m in compile_time.MODES}
    assert compile_time.medians(times["realify"]["cold"]) == {"import": 0.5, "compile": 1.0, "first call": 10.0,
                                                              "total": 11.5}
    assert [mode for mode, _ in calls] == ["default"] * 2 + ["realify"] * 4 + ["default"] * 2
    assert calls[0][1] == calls[1][1] != calls[2][1]


# ---- a device that is not here, and the machine the demo measured on --------------------------


def _without_accelerators(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: False)


@pytest.mark.parametrize("command", ["demo", "bench"])
def test_a_device_that_is_not_here_is_an_error_not_failed_examples(monkeypatch, capsys, command):
    _without_accelerators(monkeypatch)
    ran = []
    monkeypatch.setattr(runner, "run", lambda *a, **k: ran.append(1) or [])
    assert cli.main([command, "--device", "cuda", "--no-progress"]) == 2
    printed = capsys.readouterr()
    assert "--device cuda" in printed.err and "available here: cpu" in printed.err and "--device cpu" in printed.err
    assert "examples correct" not in printed.out and not ran  # nothing ran, nothing reads as realify's failure


def test_a_device_index_past_the_last_gpu_is_an_error_naming_the_gpus(monkeypatch):
    # one GPU, as torch would report it (the test runs without one)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: True)
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda *a: torch.device("cuda"))
    monkeypatch.setattr(torch.accelerator, "device_count", lambda: 1)
    assert cli._device_problem("cuda") is None and cli._device_problem("cuda:0") is None
    problem = cli._device_problem("cuda:1")
    assert "1 cuda device(s)" in problem and "available here: cpu, cuda:0" in problem
    assert "--device cuda:0" in problem


def test_a_device_name_torch_does_not_know_is_an_error(capsys):
    assert cli.main(["demo", "--device", "gpu", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "'gpu' is not a device name torch knows" in err and "cpu" in err


def test_demo_prints_the_machine_it_measured_on(monkeypatch, capsys):
    monkeypatch.setattr(runner, "demo", lambda **options: [])  # the examples themselves: the test above
    assert cli.main(["demo", "--size", "tiny", "--no-progress"]) == 0
    out = capsys.readouterr().out
    (line,) = [line for line in out.splitlines() if line.startswith("measured on:")]
    for word in (report.machine()["cpu"], "vector flags:", torch.backends.cpu.get_cpu_capability(),
                 f"{torch.get_num_threads()} torch threads", f"torch {torch.__version__}", "device cpu"):
        assert word in line, (word, line)


def test_vector_flags_are_read_from_cpuinfo():
    x86 = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma avx512f avx512_bf16 avx512_vnni amx_bf16 amx_tile\n"
    assert report.vector_flags(x86) == ["avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_tile"]
    arm = "processor\t: 0\nFeatures\t: fp asimd evtstrm sve sve2 bf16\n"
    assert report.vector_flags(arm) == ["asimd", "sve", "sve2"]
    assert report.vector_flags("") == []


def test_overhead_mode_tables_every_call_and_layer(tmp_path, capsys):
    out_json = tmp_path / "overhead.json"
    rc = cli.main(["bench", "--overhead", "--only", "mul-add", "--repeat", "5", "--warmup", "1",
                   "--json", str(out_json)])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "mul-add fwd (tiny: n=16), median of 5 calls each, alternating" in printed
    for _, label in overhead.CALLS:
        assert label in printed
    for mode, label, _, _ in overhead.LAYERS:
        assert f"{mode}: {label}" in printed
    assert "realify minus default, whole call" in printed and "beyond the compiled graph" in printed
    (result,) = json.loads(out_json.read_text())["results"]
    assert result["workload"] == "mul-add" and result["variant"] == "fwd" and result["calls"] == 5
    assert set(result["us"]) == {name for name, _ in overhead.CALLS} and not result["notes"]
    assert all(us > 0 for us in result["us"].values())


def test_overhead_of_a_training_step_is_whole_calls():
    (fwd, train) = overhead.select(["rotary"], train=True)
    assert (fwd.variant, train.variant) == ("fwd", "train")
    result = overhead.measure(train, calls=2, warmup=0)
    assert set(result.us) == {"eager", "default", "realify"}
    assert "realify minus default, whole call" in overhead.format_overhead(result)
    assert "layer" not in overhead.format_overhead(result).splitlines()
