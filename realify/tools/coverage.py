"""``python -m realify coverage``: the OpInfo table through every front end, as a report.

Each OpInfo entry that supports complex64 on CPU is run (complex64 samples) through the eager
ComplexTensor, ``decompose``, the compile backend (eager inner) and ``realify.export`` (the
real-only ExportedProgram called through its complex adapter; first sample only, as in the
test suite). A front end's status per op is ``pass``, ``island`` (compile only: passes when
the ops without rules run as eager islands), or ``fail`` with the first line of the error.
The report is a Markdown table with a summary line, written to docs/coverage.md by default;
with ``--readme README.md`` the counts in README's coverage paragraph (between its
``coverage`` markers) are rewritten from the same run, so no count is copied by hand
(tests/test_coverage_report.py checks both files). It needs the ``coverage`` extra
(``pip install 'realify[coverage]'``: the OpInfo table imports numpy and expecttest; tqdm draws
its progress bar); without it, it names the missing package and the extra, and exits with 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

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
    line = next((t for t in text if t.strip()), type(err).__name__)
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


def survey(front_ends=FRONT_ENDS, only: list[str] | None = None,
           progress: Callable[[str], None] | None = None) -> list[OpStatus]:
    from .opinfo import (
        NONDETERMINISTIC,
        complex_ops,
        op_id,
        run_compile,
        run_decompose,
        run_eager_complex_tensor,
        run_export,
        samples,
    )

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


@dataclasses.dataclass
class Counts:
    """What a survey adds up to: ops per front end that pass, ops passing every front end,
    ops that compile only as eager islands, of ``total``."""

    total: int
    passing: dict[str, int]
    all_front_ends: int
    islands: int

    @classmethod
    def of(cls, statuses: list[OpStatus], front_ends=FRONT_ENDS) -> Counts:
        return cls(total=len(statuses),
                   passing={fe: sum(s.results[fe] == "pass" for s in statuses) for fe in front_ends},
                   all_front_ends=sum(all(s.results[fe] == "pass" for fe in front_ends) for s in statuses),
                   islands=sum(s.results.get("compile") == "island" for s in statuses))


def render(statuses: list[OpStatus], front_ends=FRONT_ENDS, seconds: float | None = None,
           torch_version: str = torch.__version__) -> str:
    counts = Counts.of(statuses, front_ends)
    total = counts.total
    lines = [
        "# OpInfo coverage",
        "",
        "Every OpInfo entry of `torch.testing._internal.common_methods_invocations.op_db` that supports",
        "complex64 on CPU, run on its complex64 samples and compared with eager complex PyTorch",
        "(export: the first sample of each op).",
        "Regenerate with `python -m realify coverage` (or `make coverage`).",
        "",
        f"torch {torch_version}" + (f", {seconds:.0f} s" if seconds else ""),
        "",
        "**Summary:** " + ", ".join(
            f"{fe} {counts.passing[fe]}/{total} ({100 * counts.passing[fe] / max(total, 1):.1f}%)" for fe in front_ends)
        + f"; all front ends {counts.all_front_ends}/{total}"
        + (f"; {counts.islands} more compile as eager islands" if "compile" in front_ends else "") + ".",
        "",
        "| op | " + " | ".join(front_ends) + " |",
        "|---|" + "---|" * len(front_ends),
    ]
    for s in statuses:
        lines.append(f"| `{s.op}` | " + " | ".join(s.results[fe] for fe in front_ends) + " |")
    return "\n".join(lines) + "\n"


def parse(report: str) -> tuple[str, list[OpStatus]]:
    """A report written by ``render`` read back: the torch version it ran on and its rows."""
    lines = report.splitlines()
    version = next(line for line in lines if line.startswith("torch "))[len("torch "):].split(",")[0]
    header = next(i for i, line in enumerate(lines) if line.startswith("| op |"))
    front_ends = [cell.strip() for cell in lines[header].strip("|").split("|")][1:]
    statuses = []
    for line in lines[header + 2:]:
        cells = [cell.strip() for cell in line.strip("|").split(" | ")]
        statuses.append(OpStatus(cells[0].strip("`"), dict(zip(front_ends, cells[1:]))))
    return version, statuses


README_START = "<!-- coverage: written by `python -m realify coverage --readme README.md` -->"
README_END = "<!-- /coverage -->"


def readme_counts(statuses: list[OpStatus], torch_version: str = torch.__version__) -> str:
    """README's coverage sentence, from a full survey (every front end)."""
    c = Counts.of(statuses)
    release = torch_version.split("+")[0]
    return (f"On torch {release}'s {c.total} entries, complex64 samples ([docs/coverage.md](docs/coverage.md)): "
            f"eager `ComplexTensor` {c.passing['eager']}/{c.total}, `decompose` {c.passing['decompose']}/{c.total}, "
            f"compile backend {c.passing['compile']}/{c.total} with real-only graphs ({c.islands} more when ops "
            f"without rules run as eager islands), `realify.export` {c.passing['export']}/{c.total}; "
            f"{c.all_front_ends} pass every front end.")


def with_readme_counts(readme: str, statuses: list[OpStatus], torch_version: str = torch.__version__) -> str:
    """``readme`` with the text between its coverage markers replaced by ``readme_counts``."""
    start, end = readme.index(README_START) + len(README_START), readme.index(README_END)
    return readme[:start] + "\n" + readme_counts(statuses, torch_version) + "\n" + readme[end:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m realify coverage", description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/coverage.md", help="Markdown report path (default: docs/coverage.md)")
    parser.add_argument("--only", nargs="*", help="substrings of op names to include")
    parser.add_argument("--front-ends", nargs="*", default=list(FRONT_ENDS), choices=FRONT_ENDS)
    parser.add_argument("--readme", help="also rewrite the counts between the coverage markers of this README "
                                         "(a full run only: every op, every front end)")
    args = parser.parse_args(argv)
    if args.readme and (args.only or tuple(args.front_ends) != FRONT_ENDS):
        parser.error("--readme needs the full survey: drop --only and --front-ends")
    try:
        from . import opinfo  # noqa: F401  PyTorch's OpInfo table: the "coverage" extra
    except ImportError as err:
        if not isinstance(err.__cause__, ModuleNotFoundError):  # not import_optional's: a bug, shown whole
            raise
        parser.exit(2, f"{parser.prog}: {err}\n")  # which package is missing, and the extra that brings it
    start = time.perf_counter()
    try:
        from tqdm import tqdm
        bar = tqdm(desc="coverage", unit="op", file=sys.stderr)
        progress = lambda name: (bar.set_postfix_str(name), bar.update(1))
    except ImportError:
        progress = None
    warnings.filterwarnings("ignore")
    statuses = survey(tuple(args.front_ends), args.only, progress)
    text = render(statuses, tuple(args.front_ends), time.perf_counter() - start)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    print(next(line for line in text.splitlines() if line.startswith("**Summary")))
    print(f"wrote {args.out}")
    if args.readme:
        readme = Path(args.readme)
        readme.write_text(with_readme_counts(readme.read_text(), statuses))
        print(f"updated the coverage counts in {args.readme}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
