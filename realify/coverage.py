"""``python -m realify coverage``: the OpInfo table through every front end, as a report.

Each OpInfo entry that supports complex64 on CPU is run (complex64 samples) through the eager
ComplexTensor, ``decompose``, the compile backend (eager inner) and ``realify.export`` (the
real-only ExportedProgram called through its complex adapter; first sample only, as in the
test suite). A front end's status per op is ``pass``, ``island`` (compile only: passes when
the ops without rules run as eager islands), or ``fail`` with the first line of the error. The report is a Markdown table with a
summary line, written to docs/coverage.md by default.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
import warnings
from pathlib import Path
from typing import Callable

import torch

FRONT_ENDS = ("eager", "decompose", "compile", "export")
# samples per op where a front end is slow per sample (export traces each program three times)
SAMPLES = {"export": 1}


@dataclasses.dataclass
class OpStatus:
    op: str
    results: dict[str, str]  # front end -> "pass" | "island" | "fail: reason"


def _first_line(err: BaseException) -> str:
    err = getattr(err, "inner_exception", None) or err  # dynamo wraps backend errors
    text = f"{type(err).__name__}: {err}".strip().splitlines()
    line = next((l for l in text if l.strip()), type(err).__name__)
    return line.replace("|", "\\|")[:120]


def _check(run: Callable, op, cases, nondeterministic: bool) -> str:
    from .opinfo import GEMM_OPS, assert_matches, call_sample, op_id

    checked = 0
    for sample in cases:
        try:
            expected = call_sample(op, sample)
        except Exception:
            continue
        try:
            assert_matches(run(op, sample), expected, metadata_only=nondeterministic, gemm=op_id(op) in GEMM_OPS)
        except Exception as err:  # a report, not a test: record every kind of failure
            return f"fail: {_first_line(err)}"
        checked += 1
    return "pass" if checked else "fail: eager rejects every sample"


def _compile_with_islands(op, sample):
    import realify
    from .opinfo import sample_program

    tensors, program = sample_program(op, sample)
    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return realify.compile(program, inner="eager", strict=False, dynamic=False)(*tensors)


def survey(front_ends=FRONT_ENDS, only: list[str] | None = None, progress: Callable[[str], None] | None = None) -> list[OpStatus]:
    from .opinfo import (NONDETERMINISTIC, complex_ops, op_id, run_compile, run_decompose, run_eager_complex_tensor,
                         run_export, samples)

    runners = {"eager": run_eager_complex_tensor, "decompose": run_decompose, "compile": run_compile,
               "export": run_export}
    statuses = []
    for op in complex_ops():
        name = op_id(op)
        if only and not any(o in name for o in only):
            continue
        if progress:
            progress(name)
        cases = samples(op, torch.complex64)
        results = {}
        for fe in front_ends:
            fe_cases = cases[: SAMPLES.get(fe, len(cases))]
            status = _check(runners[fe], op, fe_cases, name in NONDETERMINISTIC) if cases else "fail: no samples"
            if fe == "compile" and status.startswith("fail") and "MissingRuleError" in status:
                if _check(_compile_with_islands, op, cases, name in NONDETERMINISTIC) == "pass":
                    status = "island"
            results[fe] = status
        statuses.append(OpStatus(name, results))
    return statuses


def render(statuses: list[OpStatus], front_ends=FRONT_ENDS, seconds: float | None = None) -> str:
    total = len(statuses)
    counts = {fe: sum(s.results[fe] == "pass" for s in statuses) for fe in front_ends}
    islands = sum(s.results.get("compile") == "island" for s in statuses)
    all_pass = sum(all(s.results[fe] == "pass" for fe in front_ends) for s in statuses)
    lines = [
        "# OpInfo coverage",
        "",
        "Every OpInfo entry of `torch.testing._internal.common_methods_invocations.op_db` that supports",
        "complex64 on CPU, run on its complex64 samples and compared with eager complex PyTorch",
        "(export: the first sample of each op).",
        "Regenerate with `python -m realify coverage` (or `make coverage`).",
        "",
        f"torch {torch.__version__}" + (f", {seconds:.0f} s" if seconds else ""),
        "",
        "**Summary:** " + ", ".join(f"{fe} {counts[fe]}/{total} ({100 * counts[fe] / max(total, 1):.1f}%)" for fe in front_ends)
        + f"; all front ends {all_pass}/{total}"
        + (f"; {islands} more compile as eager islands" if "compile" in front_ends else "") + ".",
        "",
        "| op | " + " | ".join(front_ends) + " |",
        "|---|" + "---|" * len(front_ends),
    ]
    for s in statuses:
        lines.append(f"| `{s.op}` | " + " | ".join(s.results[fe] for fe in front_ends) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m realify coverage", description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/coverage.md", help="Markdown report path (default: docs/coverage.md)")
    parser.add_argument("--only", nargs="*", help="substrings of op names to include")
    parser.add_argument("--front-ends", nargs="*", default=list(FRONT_ENDS), choices=FRONT_ENDS)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    try:
        from tqdm import tqdm
        bar = tqdm(desc="coverage", unit="op", file=sys.stderr)
        progress = lambda name: (bar.set_postfix_str(name), bar.update(1))  # noqa: E731
    except ImportError:
        progress = None
    warnings.filterwarnings("ignore")
    statuses = survey(tuple(args.front_ends), args.only, progress)
    text = render(statuses, tuple(args.front_ends), time.perf_counter() - start)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    print(next(l for l in text.splitlines() if l.startswith("**Summary")))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
