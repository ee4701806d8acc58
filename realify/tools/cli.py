"""``python -m realify {bench,demo,coverage}``."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import logging
import sys
import time
from collections.abc import Sequence

SIZES = ("small", "large")


def _parser() -> argparse.ArgumentParser:
    from ..bench import runner, workloads

    parser = argparse.ArgumentParser(prog="python -m realify",
                                     description="realify: complex PyTorch programs on real-only compilers.")
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True, metavar="{bench,demo,coverage}")

    bench = sub.add_parser(
        "bench", help="time the workload suite under eager, torch.compile, complex wrapper and realify",
        description="Time every workload under each mode in one process; see realify's docs page 'Benchmarks'.")
    bench.add_argument("--only", action="append", metavar="NAMES",
                       help=f"comma-separated workloads to run (default: all): {', '.join(workloads.names())}")
    # "tiny" is for tests: the same code paths on toy shapes
    bench.add_argument("--size", choices=(*SIZES, "tiny"), default=None, metavar="{small,large}",
                       help="small: seconds per mode on 2 CPU cores (default); large: bigger machines and GPUs")
    bench.add_argument("--train", action="store_true",
                       help="also run the training variants (forward + backward + SGD step)")
    bench.add_argument("--modes", default=",".join(runner.DEFAULT_MODES),
                       help=f"comma-separated modes (default: {','.join(runner.DEFAULT_MODES)})")
    bench.add_argument("--repeat", type=int, default=None, metavar="N", help="timed calls per mode (default 10)")
    bench.add_argument("--warmup", type=int, default=2, metavar="N", help="untimed calls after the first (default 2)")
    bench.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    bench.add_argument("--warm-cache", action="store_true",
                       help="keep Inductor's on-disk caches on (compile times of a second run)")
    bench.add_argument("--json", metavar="PATH", help="write all results and the machine description as JSON")
    bench.add_argument("--plot", metavar="PATH.png", help="draw speedup vs eager as a grouped bar chart")
    bench.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    bench.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    bench.add_argument("--overhead", action="store_true",
                       help="per-call cost instead: eager, torch.compile and realify.compile and the layers of "
                            "their calls, alternating (default: a few workloads at toy shapes, --repeat 2000)")

    demo = sub.add_parser("demo", help="run a few workloads through backend='realify' and check them against eager")
    demo.add_argument("--size", choices=(*SIZES, "tiny"), default="small", metavar="{small,large}",
                      help="small: seconds per example on 2 CPU cores (default); large: bigger machines and GPUs")
    demo.add_argument("--repeat", type=int, default=5, metavar="N", help="timed calls per mode (default 5)")
    demo.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    demo.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")

    coverage = sub.add_parser("coverage", help="which complex ops have rules (realify.tools.coverage)", add_help=False)
    coverage.add_argument("args", nargs=argparse.REMAINDER)
    return parser


def _version() -> str:
    import platform

    import torch

    from .. import __version__

    return f"realify {__version__} (torch {torch.__version__}, Python {platform.python_version()})"


# Inductor's C++ code generator imports torch.utils.cpp_extension the first time it picks the
# CPU's vector ISA (torch/_inductor/cpu_vec_isa.py -> cpp_builder), and that import warns
# "No CUDA runtime is found, using CUDA_HOME=..." on a machine that has a CUDA toolkit (nvcc on
# PATH) but no GPU. The CPU kernels the demo and bench compile never use CUDA_HOME, so the
# notice says nothing about their run; this filter drops that one message and no other.
_CUDA_HOME_NOTICE = "No CUDA runtime is found, using CUDA_HOME='%s'"


class _WithoutCudaHomeNotice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg != _CUDA_HOME_NOTICE


def _quiet_cuda_home_notice() -> None:
    logger = logging.getLogger("torch.utils.cpp_extension")
    if not any(isinstance(f, _WithoutCudaHomeNotice) for f in logger.filters):
        logger.addFilter(_WithoutCudaHomeNotice())


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["coverage"]:
        # realify.tools.coverage parses its own options (a REMAINDER argument would refuse a leading one)
        return coverage(argv[1:])
    args = _parser().parse_args(argv)
    if args.command in ("bench", "demo"):
        problem = _device_problem(args.device)
        if problem is not None:
            # a device that is not there would fail every example, which reads as realify's failure
            print(f"error: {problem}", file=sys.stderr)
            return 2
        if args.device == "cpu":
            _quiet_cuda_home_notice()
    if args.command == "bench":
        return bench(args)
    if args.command == "demo":
        return demo(args)
    return coverage(args.args)


def _device_problem(device: str) -> str | None:
    """Why ``--device device`` cannot run here, naming the devices that can (None: it can)."""
    import torch

    available = ", ".join(_available_devices())
    try:
        wanted = torch.device(device)
    except RuntimeError:
        return f"--device {device!r} is not a device name torch knows; available here: {available}"
    if wanted.type == "cpu":
        return None
    backend = getattr(torch, wanted.type, None)
    present = backend.is_available() if hasattr(backend, "is_available") else False
    count = backend.device_count() if present and hasattr(backend, "device_count") else 0
    if count and (wanted.index is None or wanted.index < count):
        return None
    if not present:
        why = f"torch.{wanted.type}.is_available() is False (no {wanted.type} device, or no driver for it)"
        if wanted.type == "cuda" and torch.version.cuda is None:
            why = f"this torch ({torch.__version__}) is built without CUDA"
    else:
        why = f"this machine has {count} {wanted.type} device(s), numbered from 0"
    return f"--device {device}: {why}; available here: {available}. Run with --device {_available_devices()[-1]}"


def _available_devices() -> list[str]:
    """``cpu``, then each device of the accelerator torch finds (``cuda:0``, ...)."""
    import torch

    accelerator = getattr(torch, "accelerator", None)
    if accelerator is None or not accelerator.is_available():
        return ["cpu"]
    kind = accelerator.current_accelerator().type
    return ["cpu", *(f"{kind}:{i}" for i in range(accelerator.device_count()))]


def bench(args: argparse.Namespace) -> int:
    from ..bench import report, runner

    if args.overhead:
        return overhead(args)
    args.size = args.size or "small"
    args.repeat = args.repeat or 10
    try:
        cases = runner.select(args.only, train=args.train)
        modes = [m.strip() for m in args.modes.split(",") if m.strip()]
        for m in modes:
            if m not in runner.MODES:
                raise ValueError(f"unknown mode {m!r}; modes are {', '.join(runner.MODES)}")
    except (KeyError, ValueError) as e:
        print(f"error: {e.args[0]}", file=sys.stderr)
        return 2
    gemm_only = ",".join(m for m in modes if runner.MODES[m].gemm_only)
    only_note = f" ({gemm_only}: GEMM/convolution workloads only)" if gemm_only else ""
    print(f"realify bench: {len(cases)} workload variant(s), size={args.size}, modes={','.join(modes)}{only_note}, "
          f"repeat={args.repeat}", file=sys.stderr)
    start = time.perf_counter()
    rows = runner.run(cases, size=args.size, modes=modes, repeat=args.repeat, warmup=args.warmup,
                      device=args.device, cold=not args.warm_cache, progress=not args.no_progress)
    print(report.format_table(rows, markdown=args.markdown))
    m = report.machine()
    print(f"\n{m['cpu']}, {m['cores']} cores, torch {m['torch']} ({m['torch_threads']} threads); "
          f"total {time.perf_counter() - start:.0f} s")
    _explain_problems(rows)
    if args.json:
        report.write_json(rows, args.json, size=args.size, repeat=args.repeat, warmup=args.warmup,
                          device=args.device, modes=modes, cold_compile=not args.warm_cache)
        print(f"wrote {args.json}")
    if args.plot:
        report.plot(rows, args.plot, title=f"realify bench --size {args.size} ({m['cpu']}, {m['cores']} cores)")
        print(f"wrote {args.plot}")
    return 0


def overhead(args: argparse.Namespace) -> int:
    """``bench --overhead``: the per-call cost tables (realify/bench/overhead.py)."""
    from ..bench import overhead, report

    try:
        cases = overhead.select(args.only, train=args.train)
    except KeyError as e:
        print(f"error: {e.args[0]}", file=sys.stderr)
        return 2
    if args.device != "cpu":
        print("error: --overhead measures CPU calls only", file=sys.stderr)
        return 2
    size, calls = args.size or "tiny", args.repeat or 2000
    print(f"{report.demo_machine_line('cpu')}\n")
    results = []
    for case in cases:
        result = overhead.measure(case, size=size, calls=calls, warmup=max(args.warmup, 20))
        results.append(result)
        print(overhead.format_overhead(result) + "\n", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": report.machine(), "results": [r.to_dict() for r in results]}, f, indent=2)
            f.write("\n")
        print(f"wrote {args.json}")
    return 0


def _explain_problems(rows) -> None:
    """Every failed, wrong or skipped run in full, and whose code it was: the table cuts its
    status column short."""
    from ..bench import runner

    problems = [r for r in rows if r.status != "ok"]
    if not problems:
        return
    print(f"\n{len(problems)} run(s) did not pass:")
    for r in problems:
        if r.status == "skipped":
            print(f"- {r.label}, {r.mode}: skipped: {r.error}")
            continue
        what = f"failed in {runner.MODES[r.mode].owner}" if r.status == "failed" else \
            f"differs from eager (max rel err {r.max_rel_err:.1e} > {r.rtol:g}) under {runner.MODES[r.mode].owner}"
        print(f"- {r.label}, {r.mode}: {what}" + (f": {r.error}" if r.error else ""))


def demo(args: argparse.Namespace) -> int:
    from ..bench import report, runner, workloads

    print("realify demo: each example runs eagerly on complex tensors and through "
          "torch.compile(backend='realify'), which hands Inductor a real-only graph.")
    print(f"{report.demo_machine_line(args.device)}\n")
    start = time.perf_counter()
    eager: dict[str, runner.Row] = {}
    failures = 0

    def show(row: runner.Row) -> None:
        nonlocal failures
        if row.mode == "eager":
            eager[row.label] = row
            return
        ref = eager.get(row.label)
        what = workloads.get(row.workload).description
        print(f"{row.label:<18} {what}")
        if row.status == "failed":
            failures += 1
            print(f"    FAILED: {row.error}")
            return
        ok = "matches eager" if row.status == "ok" else "DIFFERS from eager"
        failures += row.status != "ok"
        print(f"    {ok}: max rel err {row.max_rel_err:.1e} (tolerance {row.rtol:g})")
        # the speedup compares realify with the eager calls that alternated with it
        baseline = row.eager_paired_ms or (ref.median_ms if ref is not None else None)
        eager_ms = f"{baseline:.2f} ms" if baseline is not None else "failed"
        speed = f" ({row.speedup:.2f}x)" if row.speedup else ""
        print(f"    eager {eager_ms}, realify {row.median_ms:.2f} ms{speed}, calls alternating; "
              f"compile {row.compile_s:.1f} s")
        for note in row.notes:
            print(f"    note: {note}")

    runner.demo(size=args.size, repeat=args.repeat, device=args.device, progress=not args.no_progress,
                on_row=show)
    correct = len(runner.DEMO) - failures
    print(f"\n{correct}/{len(runner.DEMO)} examples correct; total {time.perf_counter() - start:.0f} s")
    return 1 if failures else 0


def coverage(argv: Sequence[str]) -> int:
    if importlib.util.find_spec("realify.tools.coverage") is None:
        print("realify coverage: the realify.tools.coverage module is missing from this installation", file=sys.stderr)
        return 2
    module = importlib.import_module("realify.tools.coverage")
    result = module.main(list(argv))
    return result if isinstance(result, int) else 0
