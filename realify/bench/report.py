"""Benchmark output: a text table, a JSON file, and a speedup bar chart."""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
from collections.abc import Sequence
from typing import Any

import torch

from ..passes.gemm_form import cpu_model as _cpu_model
from ..passes.gemm_form import read_cpuinfo as _cpuinfo
from ..passes.gemm_form import vector_flags
from .runner import Row

# "eager ms" is eager's median over the calls that alternated with this mode's; "vs eager" is
# the ratio of that median to this mode's (for the eager row itself, its own median)
# "GEMM forms": the form realify chose for each complex GEMM and how (measured, cached,
# threshold, forced), with a count where several took it
COLUMNS = ("workload", "mode", "median ms", "min–max ms", "eager ms", "vs eager", "compile s", "max rel err",
           "GEMM forms", "status")


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    info: dict[str, Any] = {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name()
    return info


def demo_machine_line(device: str) -> str:
    """What the demo measured on, in one line: the CPU and its vector-width flags (with the
    instruction set ATen's CPU kernels picked), cores, threads, torch and the device."""
    flags = " ".join(vector_flags(_cpuinfo())) or "none read"
    capability = torch.backends.cpu.get_cpu_capability()
    info = machine()
    where = f"{device} ({info['gpu']})" if "gpu" in info and torch.device(device).type == "cuda" else device
    return (f"measured on: {info['cpu']} (vector flags: {flags}; ATen CPU kernels: {capability}), "
            f"{info['cores']} cores, {info['torch_threads']} torch threads (torch.get_num_threads()), "
            f"torch {info['torch']}, device {where}")


def _num(x: float | None, fmt: str) -> str:
    return "–" if x is None else format(x, fmt)


def _ms(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x:.3g}" if x < 100 else f"{x:.0f}"


def _compile(row: Row) -> str:
    """Compile seconds; for realify, "total (decompose)": the rest is the inner compiler's."""
    if row.compile_s is None or row.mode == "eager":
        return "–"
    if row.decompose_s is None:
        return f"{row.compile_s:.1f}"
    return f"{row.compile_s:.1f} ({row.decompose_s:.1f})"


def cells(row: Row, max_status: int | None = 70) -> list[str]:
    status = row.status_text()
    if max_status and len(status) > max_status:
        status = status[: max_status - 1] + "…"
    spread = "–" if row.min_ms is None else f"{_ms(row.min_ms)}–{_ms(row.max_ms)}"
    return [
        row.label,
        row.mode,
        _ms(row.median_ms),
        spread,
        _ms(row.median_ms if row.mode == "eager" else row.eager_paired_ms),
        "–" if row.speedup is None else f"{row.speedup:.2f}x",
        _compile(row),
        _num(row.max_rel_err, ".1e") if row.mode != "eager" else "ref",
        _gemm_forms(row),
        status,
    ]


def _gemm_forms(row: Row) -> str:
    """``3m (measured)``, ``pairs (cached) x2, 4m (measured)``; "–" where no complex GEMM was
    compiled by realify."""
    forms = row.gemm_forms or {}
    return ", ".join(f"{form} x{n}" if n > 1 else form for form, n in sorted(forms.items())) or "–"


def format_table(rows: Sequence[Row], *, markdown: bool = False, max_status: int | None = 70) -> str:
    """The results as a fixed-width text table (or a Markdown table)."""
    body = [cells(r, max_status) for r in rows]
    if markdown:
        lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join("---" for _ in COLUMNS) + "|"]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in line) + " |" for line in body]
        return "\n".join(lines)
    widths = [max(len(h), *(len(line[i]) for line in body)) if body else len(h) for i, h in enumerate(COLUMNS)]
    right = {2, 3, 4, 5, 6, 7}

    def fmt(line: Sequence[str]) -> str:
        cells = (c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(line, widths)))
        return "  ".join(cells).rstrip()

    out = [fmt(COLUMNS), "  ".join("-" * w for w in widths)]
    previous = None
    for row, line in zip(rows, body):
        if previous is not None and row.label != previous:
            out.append("")
        previous = row.label
        out.append(fmt(line))
    return "\n".join(out)


def to_json(rows: Sequence[Row], **meta: Any) -> dict[str, Any]:
    return {
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        **meta,
        "rows": [{k: _finite(v) for k, v in r.to_dict().items()} for r in rows],
    }


def write_json(rows: Sequence[Row], path: str, **meta: Any) -> None:
    with open(path, "w") as f:
        json.dump(to_json(rows, **meta), f, indent=2, default=str)
        f.write("\n")


def read_json(path: str) -> list[Row]:
    """The rows :func:`write_json` wrote (to plot or tabulate a run again)."""
    with open(path) as f:
        data = json.load(f)
    return [Row(**{k: float(v) if v in ("inf", "-inf", "nan") else v for k, v in row.items()}) for row in data["rows"]]


def _finite(x: Any) -> Any:
    """JSON has no inf/nan: write them as strings."""
    return str(x) if isinstance(x, float) and not math.isfinite(x) else x


def plot(rows: Sequence[Row], path: str, *, title: str | None = None) -> None:
    """Grouped bar chart of speedup vs eager (log scale), one group per workload variant,
    one bar per compiled mode, labelled with its value; failed, wrong or skipped results are
    marked with an x at 1.0 in the mode's colour."""
    from .._optional import import_optional

    matplotlib = import_optional("matplotlib", "bench", "python -m realify bench --plot")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(dict.fromkeys(r.label for r in rows))
    modes = list(dict.fromkeys(r.mode for r in rows if r.mode != "eager"))
    by_key = {(r.label, r.mode): r for r in rows}
    n = max(len(modes), 1)
    width = 0.8 / n
    fig, ax = plt.subplots(figsize=(min(20.0, max(6.0, 0.22 * len(labels) * max(n, 2) + 2)), 4.5))
    for j, mode in enumerate(modes):
        color = f"C{j}"  # one colour per mode, whether or not any of its runs passed
        xs, ys, bad = [], [], []
        for i, label in enumerate(labels):
            r = by_key.get((label, mode))
            if r is None:
                continue
            x = i - 0.4 + width * (j + 0.5)
            if r.speedup is None or r.status != "ok":
                bad.append(x)
            if r.speedup is not None:
                xs.append(x)
                ys.append(r.speedup)
        bars = ax.bar(xs, ys, width, label=mode, color=color)
        ax.bar_label(bars, fmt="%.2f", fontsize=6, rotation=90, padding=2)
        if bad:
            ax.plot(bad, [1.0] * len(bad), "x", color=color, markersize=8, markeredgewidth=2)
    ax.plot([], [], "x", color="gray", markersize=8, markeredgewidth=2, label="failed, wrong or skipped")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    low, high = ax.get_ylim()
    ax.set_ylim(low, high * 1.6)  # room above the tallest bar for its label and the legend
    ax.set_ylabel("speedup vs eager (higher is better)")
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=30, ha="right")
    ax.set_title(title or "realify benchmarks")
    ax.legend(fontsize="small", loc="upper left", ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
