"""Which form each complex matrix product takes in the compile backend: chosen by measurement.

A complex ``mm`` or ``bmm`` of real parts (the layout pass's rule 3 finds it,
realify/passes/layout.py) can run in three forms, all of them correct:

- ``"pairs"``: BLAS's complex GEMM on the (re, im) pairs (``realify::cmm_pairs``), eager's own
  kernel and rounding; planar factors are stacked into pairs, the result is split again;
- ``"4m"``: four real GEMMs on the planes, the textbook formula
  ``(Ar Br - Ai Bi) + (Ar Bi + Ai Br) i``;
- ``"3m"``: three real GEMMs, Gauss's form (realify/passes/gauss.py), ``Im = (Ar + Ai)(Br +
  Bi) - Ar Br - Ai Bi``.

Which is fastest depends on the sizes, strides and dtype, on the BLAS and on the CPU: a fixed
threshold (``layout.PAIRS_GEMM_INTENSITY``) is one machine's crossover. So, as Inductor's
autotuning does for its kernels, the compile backend times each candidate form on random data
of the product's shapes, strides and dtype (:func:`time_form`, a few runs, their median) and
keeps the fastest; the timings are cached on disk (:func:`cache_path`), keyed by what decides
them (:func:`problem_key`: the CPU model and its vector flags, torch's version and thread
count, the op, its operands' shapes and strides, the dtype), so each product shape is timed
once per machine. ``realify.config.gemm_form`` says how the form is picked (measured, the
threshold rule, or one form forced); the compile backend sets it around its trace
(:func:`choosing`), so :func:`realify.decompose` and :func:`realify.export`, which hold no
choice, keep the planar forms of ``gemm_multiplications`` (and the threshold rule where
``decompose`` is asked for pair products).

The candidates are the forms the other options allow: ``"pairs"`` where
``interleaved_products`` is on, ``"3m"`` where ``gemm_multiplications`` is 3; ``"4m"`` always
(the most accurate planar form, so choosing it never loosens an error bound). No product is
timed where the choice cannot be measured well or cannot matter, and the threshold rule
decides instead (:func:`decide`): symbolic sizes (a timing holds for one size), an inner
dimension below ``layout.PAIRS_GEMM_MIN_INNER`` (there the planar product fuses with the
elementwise work around it, which an isolated timing cannot see), and products of fewer than
:data:`TIMED_WORK` complex multiply-adds (a few microseconds in every form: below the timing's
noise).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import json
import logging
import math
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

log = logging.getLogger(__name__)

FORMS = ("pairs", "4m", "3m")
# what realify.config.gemm_form accepts: how the form is picked, or the form itself
CHOICES = ("measure", "threshold", *FORMS)

# the least work (complex multiply-adds, batch included) timed: 32^3 takes microseconds in
# every form, where a timing's noise is as large as the difference between forms
TIMED_WORK = 32**3
# each form runs once untimed (allocations, BLAS's threads), then up to REPEATS timed runs,
# fewer once they took TIME_BUDGET_S together (a large product is timed once or twice)
REPEATS = 5
TIME_BUDGET_S = 0.05

# The threshold rule (realify/passes/layout.py, rule 3). Matrix products below this arithmetic
# intensity (m n k / (m k + k n + m n) per matrix, the flops per element moved, about n/3 for
# square n x n products) and with an inner dimension k of at least PAIRS_GEMM_MIN_INNER run as
# BLAS's complex GEMM on the pairs: the planar form's measured crossover above; below, a
# product as short as a quantum gate's (k = 2) is cheaper planar, next to the elementwise work
# around it (docs/benchmarks.md, "Measurements behind design choices").
PAIRS_GEMM_INTENSITY = 192
PAIRS_GEMM_MIN_INNER = 16

FORM_KEY = "realify_gemm_form"  # the chosen form, on the real product nodes of a complex one


@dataclasses.dataclass(frozen=True)
class Operand:
    """One factor as the graph holds it: ``pairs`` (shape, stride) of a real ``(..., 2)``
    tensor, or its two planes' (shape, stride) each."""

    pairs: tuple[tuple[int, ...], tuple[int, ...]] | None
    planes: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] = ()


@dataclasses.dataclass(frozen=True)
class MatrixProduct:
    """A complex matrix product to time: ``op`` ("mm" or "bmm"), its factors, the real
    dtype of their parts, the device."""

    op: str
    a: Operand
    b: Operand
    dtype: str  # "float32" or "float64"
    device: str

    @property
    def work(self) -> int:
        """Complex multiply-adds: batch m n k."""
        a_shape = (self.a.pairs or self.a.planes[0])[0]
        b_shape = (self.b.pairs or self.b.planes[0])[0]
        if self.a.pairs is not None:
            a_shape = a_shape[:-1]
        if self.b.pairs is not None:
            b_shape = b_shape[:-1]
        return math.prod(a_shape) * b_shape[-1]

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Choice:
    """How the compile backend picks forms for one trace: ``how`` (a value of
    ``realify.config.gemm_form``), whether pairs and Gauss's form are allowed."""

    how: str
    pairs: bool
    gauss: bool

    @property
    def candidates(self) -> tuple[str, ...]:
        return tuple(f for f in FORMS if (f != "pairs" or self.pairs) and (f != "3m" or self.gauss))


_HOW: contextvars.ContextVar[str | None] = contextvars.ContextVar("realify_gemm_form", default=None)


@contextlib.contextmanager
def choosing(how: str) -> Iterator[None]:
    """Pick product forms by ``how`` (a value of ``realify.config.gemm_form``) in the traces
    made inside the block: the compile backend's."""
    token = _HOW.set(how)
    try:
        yield
    finally:
        _HOW.reset(token)


def current() -> str | None:
    """How forms are picked in this trace; None outside the compile backend (the threshold
    rule where pair products are asked for, else ``gemm_multiplications``' planar form)."""
    return _HOW.get()


def decide(choice: Choice, problem: MatrixProduct | None, inner: int | None, rule: str) -> tuple[str, str]:
    """The form of one product and how it was picked. ``problem``: its static description
    (None at symbolic sizes), ``inner``: its inner dimension, ``rule``: the threshold rule's
    form ("pairs" or the planar form)."""
    planar = "3m" if choice.gauss else "4m"
    if choice.how == "threshold":
        return rule, "threshold"
    if choice.how in FORMS:
        form = choice.how if choice.how in choice.candidates else planar
        if form == "pairs" and problem is None:
            return planar, "forced; symbolic sizes stay planar"
        return form, "forced"
    if problem is None:
        return rule, "threshold (symbolic sizes)"
    if inner is not None and inner < PAIRS_GEMM_MIN_INNER:
        return rule, "threshold (short inner dimension)"
    if problem.work < TIMED_WORK:
        return rule, "threshold (small)"
    if problem.device.split(":")[0] not in ("cpu", "cuda"):
        return rule, "threshold (device not timed)"
    timings, how = measured(problem, choice.candidates)
    return min(choice.candidates, key=lambda f: timings[f]), how


def measured(problem: MatrixProduct, forms: tuple[str, ...]) -> tuple[dict[str, float], str]:
    """The median seconds of each form in ``forms``, from the disk cache where it holds them,
    else timed by :data:`timer` and added to the cache; and "cached" or "measured"."""
    key = problem_key(problem)
    entries = _read_cache()
    known = dict(entries.get(key, {}))
    missing = [f for f in forms if not isinstance(known.get(f), (int, float))]
    if not missing:
        return known, "cached"
    for form in missing:
        known[form] = float(timer(problem, form))
    _write_cache(key, known)
    return known, "measured"


# ---- timing ----------------------------------------------------------------------------------


def time_form(problem: MatrixProduct, form: str) -> float:
    """Median seconds of ``form`` on random data laid out as ``problem`` says (real tensors,
    outside any tracing mode, without autograd or autocast)."""
    from torch.utils._python_dispatch import _disable_current_modes

    device = torch.device(problem.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    with _disable_current_modes(), torch.no_grad(), torch.autocast(device.type, enabled=False):
        generator = torch.Generator().manual_seed(0)
        a, b = (_operand(x, getattr(torch, problem.dtype), device, generator) for x in (problem.a, problem.b))
        run = _FORM_RUNS[form]
        mm = torch.mm if problem.op == "mm" else torch.bmm
        run(mm, a, b)
        sync()
        times: list[float] = []
        while len(times) < REPEATS and sum(times) < TIME_BUDGET_S:
            start = time.perf_counter()
            run(mm, a, b)
            sync()
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def _strided(spec: tuple[tuple[int, ...], tuple[int, ...]], dtype: torch.dtype, device: torch.device,
             generator: torch.Generator) -> torch.Tensor:
    """Random values with ``spec``'s shape and strides (broadcast strides of 0 included)."""
    shape, stride = spec
    extent = 1 + sum((n - 1) * s for n, s in zip(shape, stride)) if all(shape) else 1
    return torch.randn(extent, dtype=dtype, generator=generator).to(device).as_strided(shape, stride)


def _operand(x: Operand, dtype: torch.dtype, device: torch.device, generator: torch.Generator) -> tuple:
    """(re, im, pairs or None) of a factor: planes read from pairs are their stride-2 views."""
    if x.pairs is not None:
        pairs = _strided(x.pairs, dtype, device, generator)
        return pairs[..., 0], pairs[..., 1], pairs
    re, im = (_strided(p, dtype, device, generator) for p in x.planes)
    return re, im, None


def _on_pairs(mm: Callable, a: tuple, b: tuple) -> Any:
    pa = a[2] if a[2] is not None else torch.stack(a[:2], -1)
    pb = b[2] if b[2] is not None else torch.stack(b[:2], -1)
    return torch.ops.realify.cmm_pairs.default(pa, pb, False, False)


def _four(mm: Callable, a: tuple, b: tuple) -> Any:
    (ar, ai, _), (br, bi, _) = a, b
    return mm(ar, br) - mm(ai, bi), mm(ar, bi) + mm(ai, br)


def _three(mm: Callable, a: tuple, b: tuple) -> Any:
    (ar, ai, _), (br, bi, _) = a, b
    t1, t2 = mm(ar, br), mm(ai, bi)
    return t1 - t2, mm(ar + ai, br + bi) - t1 - t2


_FORM_RUNS: dict[str, Callable] = {"pairs": _on_pairs, "4m": _four, "3m": _three}

# what :func:`measured` times a form with: ``timer(problem, form) -> seconds`` (tests put a
# deterministic one here)
timer: Callable[[MatrixProduct, str], float] = time_form


# ---- the disk cache ----------------------------------------------------------------------------


def cache_path() -> Path:
    """The timings' file: ``gemm_forms.json`` in ``$REALIFY_CACHE_DIR``, else in
    ``~/.cache/realify``."""
    root = os.environ.get("REALIFY_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "realify")
    return Path(root) / "gemm_forms.json"


def problem_key(problem: MatrixProduct) -> str:
    """The cache key of ``problem``'s timings: the machine (:func:`machine_key`) and the
    product, as canonical JSON."""
    return json.dumps({"machine": machine_key(problem.device), "product": problem.to_json()}, sort_keys=True)


def machine_key(device: str) -> dict[str, Any]:
    """What a timing depends on beyond the product: the CPU model and its vector flags (the
    kernels BLAS and Inductor pick), torch's version (its BLAS and kernels), torch's thread
    count, and a GPU's name where the product runs on one."""
    key: dict[str, Any] = {"cpu": cpu_model(), "vector_flags": vector_flags(read_cpuinfo()),
                           "torch": torch.__version__, "threads": torch.get_num_threads()}
    if torch.device(device).type == "cuda":
        key["gpu"] = torch.cuda.get_device_name(torch.device(device))
    return key


def _read_cache() -> dict[str, dict[str, float]]:
    """The cached timings; an unreadable or malformed file holds none (it is rewritten whole
    at the next measurement)."""
    try:
        data = json.loads(cache_path().read_text())
        entries = data["timings"]
        return entries if isinstance(entries, dict) else {}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def _write_cache(key: str, timings: dict[str, float]) -> None:
    """Add one entry, written atomically (a temporary file renamed over the old one: a
    concurrent reader sees the old file or the new one, never half of one); where the
    directory cannot be written, the timing is kept for this choice only."""
    path = cache_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        entries = _read_cache()
        entries[key] = timings
        fd, tmp = tempfile.mkstemp(prefix=".gemm_forms.", suffix=".json", dir=path.parent)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump({"format": 1, "timings": entries}, f, indent=1, sort_keys=True)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as err:
        log.debug("realify: GEMM form timings not cached (%s)", err)


# ---- the host ------------------------------------------------------------------------------------


def read_cpuinfo() -> str:
    """``/proc/cpuinfo``'s text, empty where there is none."""
    try:
        with open("/proc/cpuinfo") as f:
            return f.read()
    except OSError:
        return ""


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``'s ``model name``, else
    ``platform.processor()``)."""
    for line in read_cpuinfo().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


# CPU features that set the width of the vectors kernels compute on: x86's AVX2 (256-bit),
# AVX-512 (512-bit, and its bfloat16/VNNI extensions) and AMX tiles; ARM's NEON (asimd) and SVE
_VECTOR_FLAG_PREFIXES = ("avx2", "avx512", "amx", "asimd", "sve")


def vector_flags(cpuinfo: str) -> list[str]:
    """The vector-width flags of the first CPU that ``/proc/cpuinfo``'s text describes (x86's
    ``flags`` line, ARM's ``Features``)."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return [f for f in value.split() if f.startswith(_VECTOR_FLAG_PREFIXES)]
    return []


def count(form: str, how: str) -> None:
    """Count a choice in dynamo's counters (``python -m realify bench`` reports them)."""
    from torch._dynamo.utils import counters

    counters["realify_gemm_form"][f"{form} ({how})"] += 1
