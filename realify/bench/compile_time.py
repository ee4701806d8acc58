"""Compile time as a user meets it: the first call of a compiled function in a fresh process,
cold (empty on-disk caches) and warm (the same script run again), realify against
torch.compile's default, modes alternating.

    python -m realify.bench.compile_time [--trials 3] [--size 65536]

Each measurement is a new Python process with its own Inductor cache directory (the warm run
reuses the one its cold run filled). The time is everything a mode does after ``import torch``
up to the first call's result: ``import realify`` (realify only), ``torch.compile(...)`` (which
imports Inductor for the default backend; realify's backend imports it at the first call) and
the first call (dynamo, realify's decompose, AOTAutograd and Inductor, or their cache hits).
Timing only the first call would charge realify for the Inductor import the default does
inside ``torch.compile(...)``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

MODES = ("default", "realify")

PROGRAM = r"""
import json, sys, time, torch

def docs_chain(a, b):
    return torch.atan(torch.cos(a * b) / torch.sin(a + b))

mode, n = sys.argv[1], int(sys.argv[2])
a, b = torch.randn(n, dtype=torch.complex64), torch.randn(n, dtype=torch.complex64)
start = time.perf_counter()
if mode == "realify":
    import realify
imported = time.perf_counter()
compiled = torch.compile(docs_chain, backend="realify" if mode == "realify" else "inductor")
constructed = time.perf_counter()
compiled(a, b)
done = time.perf_counter()
print(json.dumps({"import": imported - start, "compile": constructed - imported, "first call": done - constructed}))
"""

PARTS = ("import", "compile", "first call")


def first_call_s(mode: str, cache_dir: str, size: int) -> dict[str, float]:
    """Seconds of each part of a fresh process's way to its first result (PARTS)."""
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache_dir}
    done = subprocess.run([sys.executable, "-c", PROGRAM, mode, str(size)], env=env, capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{mode} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(trials: int, size: int) -> dict[str, dict[str, list[dict[str, float]]]]:
    times: dict[str, dict[str, list[dict[str, float]]]] = {m: {"cold": [], "warm": []} for m in MODES}
    for trial in range(trials):
        for mode in MODES if trial % 2 == 0 else reversed(MODES):
            with tempfile.TemporaryDirectory() as cache_dir:
                for kind in ("cold", "warm"):
                    times[mode][kind].append(first_call_s(mode, cache_dir, size))
    return times


def medians(runs: list[dict[str, float]]) -> dict[str, float]:
    """Median of each part and of the total, over runs."""
    return {part: statistics.median(run[part] for run in runs) for part in PARTS} | {
        "total": statistics.median(sum(run.values()) for run in runs)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m realify.bench.compile_time", description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=3, help="cold/warm pairs per mode (default 3)")
    parser.add_argument("--size", type=int, default=2**16, help="elements of each complex64 input (default 65536)")
    args = parser.parse_args(argv)
    times = measure(args.trials, args.size)
    print(f"the docs chain's first result after `import torch`, medians of {args.trials} fresh processes")
    print(f"{'':8}{'default':>10}{'realify':>10}{'ratio':>8}   realify: import / torch.compile() / first call"
          "   default: torch.compile() / first call")
    for kind in ("cold", "warm"):
        d, r = medians(times["default"][kind]), medians(times["realify"][kind])
        print(f"{kind:8}{d['total']:9.2f}s{r['total']:9.2f}s{r['total'] / d['total']:7.2f}x"
              f"   {r['import']:.2f} / {r['compile']:.2f} / {r['first call']:.2f} s"
              f"   {d['compile']:.2f} / {d['first call']:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
