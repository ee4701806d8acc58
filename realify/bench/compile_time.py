"""Compile time as a user meets it: the first call of a compiled function in a fresh process,
cold (empty on-disk caches) and warm (the same script run again), realify against
torch.compile's default, modes alternating.

    python -m realify.bench.compile_time [--trials 3] [--size 65536]

Each measurement is a new Python process with its own Inductor cache directory (the warm run
reuses the one its cold run filled); the time is that of the first call only (dynamo,
realify's decompose, AOTAutograd and Inductor, or their cache hits), not of imports.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

MODES = ("default", "realify")

PROGRAM = r"""
import sys, time, torch
import realify

def docs_chain(a, b):
    return torch.atan(torch.cos(a * b) / torch.sin(a + b))

n = int(sys.argv[2])
a, b = torch.randn(n, dtype=torch.complex64), torch.randn(n, dtype=torch.complex64)
compiled = torch.compile(docs_chain, backend="realify") if sys.argv[1] == "realify" else torch.compile(docs_chain)
start = time.perf_counter()
compiled(a, b)
print(time.perf_counter() - start)
"""


def first_call_s(mode: str, cache_dir: str, size: int) -> float:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache_dir}
    done = subprocess.run([sys.executable, "-c", PROGRAM, mode, str(size)], env=env, capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{mode} failed:\n{done.stderr[-2000:]}")
    return float(done.stdout.strip().splitlines()[-1])


def measure(trials: int, size: int) -> dict[str, dict[str, list[float]]]:
    times: dict[str, dict[str, list[float]]] = {m: {"cold": [], "warm": []} for m in MODES}
    for trial in range(trials):
        for mode in MODES if trial % 2 == 0 else reversed(MODES):
            with tempfile.TemporaryDirectory() as cache_dir:
                for kind in ("cold", "warm"):
                    times[mode][kind].append(first_call_s(mode, cache_dir, size))
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m realify.bench.compile_time", description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=3, help="cold/warm pairs per mode (default 3)")
    parser.add_argument("--size", type=int, default=2**16, help="elements of each complex64 input (default 65536)")
    args = parser.parse_args(argv)
    times = measure(args.trials, args.size)
    medians = {m: {k: statistics.median(v) for k, v in kinds.items()} for m, kinds in times.items()}
    print("first call of the docs chain, medians of", args.trials, "fresh processes")
    print(f"{'':8}{'default':>10}{'realify':>10}{'ratio':>8}")
    for kind in ("cold", "warm"):
        d, r = medians["default"][kind], medians["realify"][kind]
        print(f"{kind:8}{d:9.2f}s{r:9.2f}s{r / d:7.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
