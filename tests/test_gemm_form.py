"""The compile backend's choice of form for complex matrix products (realify/passes/gemm_form.py):
the choice logic with a deterministic timer, forced forms against eager, the disk cache.
Timings themselves are the benchmark's business (``python -m realify bench``), not a test's."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from backend_support import RecordingInner
from torch._dynamo.utils import counters

import realify
from realify.passes import gemm_form

aten = torch.ops.aten
CMM_PAIRS = torch.ops.realify.cmm_pairs.default


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty timings cache of the test's own."""
    monkeypatch.setenv("REALIFY_CACHE_DIR", str(tmp_path))
    return tmp_path / "gemm_forms.json"


class FakeTimer:
    """Seconds per form, as given; records what it was asked to time."""

    def __init__(self, **seconds: float):
        # m4, m3: keywords for "4m", "3m"
        named = {f"{k[1]}m" if k in ("m4", "m3") else k: v for k, v in seconds.items()}
        self.seconds = {"pairs": 1.0, "4m": 1.0, "3m": 1.0, **named}
        self.calls: list[tuple[str, str]] = []

    def __call__(self, problem: gemm_form.MatrixProduct, form: str) -> float:
        self.calls.append((problem.op, form))
        return self.seconds[form]


def _timer(monkeypatch, **seconds: float) -> FakeTimer:
    timer = FakeTimer(**seconds)
    monkeypatch.setattr(gemm_form, "timer", timer)
    return timer


def _forward_graph(program, *args, **options):
    torch._dynamo.reset()
    counters.clear()
    rec = RecordingInner()
    with realify.config.patch(**options):
        realify.compile(program, inner=rec)(*args)
    return next(gm for kind, gm in rec.graphs if kind == "forward")


def _count(gm, target) -> int:
    return sum(n.target is target for n in gm.graph.nodes)


def _form_of(gm, op=aten.mm.default) -> str:
    """The form one complex product of ``op`` took in ``gm``."""
    if _count(gm, CMM_PAIRS):
        return "pairs"
    return {4: "4m", 3: "3m"}[_count(gm, op)]


def _mm(a, b):
    return a @ b


def _square(n=64, dtype=torch.complex64):
    torch.manual_seed(0)
    return torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)


def test_option_is_validated():
    assert realify.config.snapshot()["gemm_form"] == "threshold"  # tests/conftest.py pins it
    with pytest.raises(ValueError, match=r"gemm_form must be one of .* got '4M' \(did you mean '4m'\?\)"):
        realify.config.patch(gemm_form="4M")
    with pytest.raises(ValueError, match="gemm_form"):
        realify.config.patch(gemm_form=3)


@pytest.mark.parametrize("fastest", ["pairs", "4m", "3m"])
def test_measured_choice_is_the_fastest_candidate(fastest, cache, monkeypatch):
    timer = _timer(monkeypatch, **{fastest: 0.5})
    gm = _forward_graph(_mm, *_square(), gemm_form="measure")
    assert _form_of(gm) == fastest
    assert sorted(form for _, form in timer.calls) == ["3m", "4m", "pairs"]
    assert dict(counters["realify_gemm_form"]) == {f"{fastest} (measured)": 1}


def test_candidates_follow_the_other_options(cache, monkeypatch):
    # three products only where gemm_multiplications allows them, pairs only with
    # interleaved_products: the fastest form that is not allowed is never picked or timed
    timer = _timer(monkeypatch, m3=0.1, pairs=0.2, m4=0.3)
    gm = _forward_graph(_mm, *_square(), gemm_form="measure", gemm_multiplications=4)
    assert _form_of(gm) == "pairs" and "3m" not in {f for _, f in timer.calls}
    gm = _forward_graph(_mm, *_square(), gemm_form="measure", gemm_multiplications=4, interleaved_products=False)
    assert _form_of(gm) == "4m"
    gm = _forward_graph(_mm, *_square(), gemm_form="measure", interleaved_products=False)
    assert _form_of(gm) == "3m"
    # forced forms that are not candidates give gemm_multiplications' planar form
    assert _form_of(_forward_graph(_mm, *_square(), gemm_form="3m", gemm_multiplications=4)) == "4m"
    assert _form_of(_forward_graph(_mm, *_square(), gemm_form="pairs", interleaved_products=False)) == "3m"
    assert len(timer.calls) == 3  # pairs and 4m once, then 3m where it became a candidate


def test_cached_choice_is_reused_without_timing(cache, monkeypatch):
    timer = _timer(monkeypatch, m4=0.5)
    _forward_graph(_mm, *_square(), gemm_form="measure")
    assert len(timer.calls) == 3 and cache.exists()
    gm = _forward_graph(_mm, *_square(), gemm_form="measure")  # a new compile, same shapes
    assert len(timer.calls) == 3 and _form_of(gm) == "4m"
    assert dict(counters["realify_gemm_form"]) == {"4m (cached)": 1}
    entries = json.loads(cache.read_text())["timings"]
    (key,) = entries
    assert json.loads(key)["product"]["op"] == "mm" and entries[key] == {"pairs": 1.0, "4m": 0.5, "3m": 1.0}
    # another shape is timed again
    _forward_graph(_mm, *_square(48), gemm_form="measure")
    assert len(timer.calls) == 6


def test_cache_key_changes_with_the_machine(cache, monkeypatch):
    problem = gemm_form.MatrixProduct("mm", gemm_form.Operand(None, (((64, 64), (64, 1)),) * 2),
                                      gemm_form.Operand(None, (((64, 64), (64, 1)),) * 2), "float32", "cpu")
    key = gemm_form.problem_key(problem)
    monkeypatch.setattr(gemm_form, "cpu_model", lambda: "Another CPU")
    other = gemm_form.problem_key(problem)
    assert other != key and json.loads(other)["machine"]["cpu"] == "Another CPU"
    threads = torch.get_num_threads()
    torch.set_num_threads(threads + 1)
    try:
        assert gemm_form.problem_key(problem) != other
    finally:
        torch.set_num_threads(threads)
    # a choice timed on one CPU is timed again on another
    timer = _timer(monkeypatch)
    choice = gemm_form.Choice("measure", pairs=True, gauss=True)
    assert gemm_form.decide(choice, problem, 64, "pairs")[1] == "measured"
    assert gemm_form.decide(choice, problem, 64, "pairs")[1] == "cached"
    monkeypatch.setattr(gemm_form, "cpu_model", lambda: "A third CPU")
    assert gemm_form.decide(choice, problem, 64, "pairs")[1] == "measured"
    assert len(timer.calls) == 6


def test_corrupt_or_unwritable_cache_is_no_error(cache, monkeypatch, tmp_path):
    timer = _timer(monkeypatch, pairs=0.5)
    cache.write_text("{not json")
    assert _form_of(_forward_graph(_mm, *_square(), gemm_form="measure")) == "pairs"
    assert len(json.loads(cache.read_text())["timings"]) == 1  # rewritten whole
    cache.write_text(json.dumps({"format": 1, "timings": [1, 2]}))
    assert _form_of(_forward_graph(_mm, *_square(), gemm_form="measure")) == "pairs"
    blocked = tmp_path / "a file"
    blocked.write_text("")
    monkeypatch.setenv("REALIFY_CACHE_DIR", str(blocked / "below"))  # not a directory
    assert _form_of(_forward_graph(_mm, *_square(), gemm_form="measure")) == "pairs"
    assert len(timer.calls) == 9


def test_no_timing_where_the_threshold_rule_decides(cache, monkeypatch):
    # tiny products (below TIMED_WORK), a short inner dimension, symbolic sizes
    timer = _timer(monkeypatch, m4=0.5)
    small = _square(16)
    assert _form_of(_forward_graph(_mm, *small, gemm_form="measure")) == "pairs"  # the rule's form
    assert dict(counters["realify_gemm_form"]) == {"pairs (threshold (small))": 1}
    a, b = torch.randn(256, 2, dtype=torch.complex64), torch.randn(2, 256, dtype=torch.complex64)
    assert _form_of(_forward_graph(_mm, a, b, gemm_form="measure")) == "3m"
    torch._dynamo.reset()
    counters.clear()
    with realify.config.patch(gemm_form="measure"):
        f = realify.compile(_mm, inner="eager", dynamic=True)
        torch.testing.assert_close(f(*_square(64)), _mm(*_square(64)))
    assert timer.calls == []
    assert dict(counters["realify_gemm_form"]) == {"3m (threshold (symbolic sizes))": 1}


def test_export_and_decompose_hold_no_choice(cache, monkeypatch):
    # the choice is the compile backend's: a decomposed or exported program keeps the planar
    # form of gemm_multiplications, standard ops only
    timer = _timer(monkeypatch, pairs=0.5)
    a, b = _square()
    with realify.config.patch(gemm_form="pairs"):
        gm = realify.decompose(_mm, [a, b])
        exported = realify.export(_mm, (a, b))
    assert _count(gm, CMM_PAIRS) == 0 and _count(gm, aten.mm.default) == 3
    assert _count(exported.graph_module, CMM_PAIRS) == 0 and _count(exported.graph_module, aten.mm.default) == 3
    assert timer.calls == []


def _programs(dtype):
    torch.manual_seed(1)
    r = lambda *s: torch.randn(*s, dtype=dtype)
    return {
        "mm": (lambda a, b: a @ b.mT.conj(), (r(40, 48), r(36, 48))),
        "bmm": (torch.bmm, (r(3, 40, 32), r(3, 32, 24))),
        "einsum": (lambda x, w: torch.einsum("bixy,ioxy->boxy", x, w), (r(4, 32, 3, 3), r(32, 20, 3, 3))),
        "conv": (lambda x, w: F.conv2d(x, w, padding=1) @ x.mT, (r(2, 16, 8, 8), r(16, 16, 3, 3))),
    }


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128], ids=str)
@pytest.mark.parametrize("form", ["pairs", "4m", "3m"])
@pytest.mark.parametrize("name", ["mm", "bmm", "einsum", "conv"])
def test_forced_form_gives_eagers_values_and_gradients(name, form, dtype, cache, monkeypatch):
    timer = _timer(monkeypatch)
    program, args = _programs(dtype)[name]
    args = [x.requires_grad_() for x in args]
    expected = program(*args)
    weights = torch.randn_like(expected)  # a loss whose gradient reaches every output element
    expected_grads = torch.autograd.grad((expected * weights).real.sum(), args)
    gm = _forward_graph(program, *[x.detach() for x in args], gemm_form=form)
    torch._dynamo.reset()
    with realify.config.patch(gemm_form=form):
        got = realify.compile(program, inner="eager")(*args)
        grads = torch.autograd.grad((got * weights).real.sum(), args)
    tol = 1e-5 if dtype == torch.complex64 else 1e-12
    torch.testing.assert_close(got, expected, rtol=tol, atol=tol)
    for g, e in zip(grads, expected_grads):
        torch.testing.assert_close(g, e, rtol=10 * tol, atol=10 * tol)
    if form == "pairs":
        assert _count(gm, CMM_PAIRS) >= 1 and _count(gm, aten.mm.default) + _count(gm, aten.bmm.default) == 0
    else:
        reals = _count(gm, aten.mm.default) + _count(gm, aten.bmm.default)
        assert _count(gm, CMM_PAIRS) == 0 and reals == int(form[0]), gm.code
    assert timer.calls == []


def test_changing_the_option_after_compiling_is_refused():
    a, b = _square()
    torch._dynamo.reset()
    with realify.config.patch(gemm_form="4m"):
        f = realify.compile(_mm, inner="eager")
        f(a, b)
    with pytest.raises(realify.OptionsChangedError, match="gemm_form from '4m' to 'threshold'"):
        f(a, b)
    torch._dynamo.reset()


@pytest.mark.parametrize("form", ["pairs", "4m", "3m"])
def test_the_timer_runs_each_form_on_laid_out_operands(form):
    # real timings (not compared: they are the machine's): pairs as a factor, a transposed
    # plane, a broadcast batch, float64
    pairs = gemm_form.Operand(((2, 24, 32, 2), (1536, 64, 2, 1)))
    planes = gemm_form.Operand(None, (((2, 32, 16), (0, 1, 32)), ((2, 32, 16), (512, 16, 1))))
    for dtype in ("float32", "float64"):
        problem = gemm_form.MatrixProduct("bmm", pairs, planes, dtype, "cpu")
        assert problem.work == 2 * 24 * 32 * 16
        assert 0 < gemm_form.time_form(problem, form) < 1
