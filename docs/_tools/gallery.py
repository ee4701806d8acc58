"""Run the gallery's scripts (examples/*.py) and write their pages under docs/gallery/.

    python docs/_tools/gallery.py            # what `make docs` runs before `mkdocs build`

Each script runs in a fresh interpreter with docs/gallery/ as its working directory, where it
saves its figure (``<name>.png``). Its page holds the script's docstring, the figure, what it
printed, how long it ran, and its source. A script that fails, or saves no figure, fails the
build. The pages and figures are made on every build and not kept in git (.gitignore).
"""

from __future__ import annotations

import os
import pathlib
import platform
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
OUT = ROOT / "docs" / "gallery"
# the order of the gallery's pages (mkdocs.yml's nav lists the same)
ORDER = ["fno_burgers", "mri_reconstruction", "rotary_onnx", "mixed_precision"]


def _docstring(source: str) -> tuple[str, str]:
    """The title (the docstring's first line) and the rest of the module docstring."""
    body = source.split('"""', 2)[1].strip()
    title, _, rest = body.partition("\n")
    return title.strip(), rest.strip()


def _cpu() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()}, {os.cpu_count()} logical CPUs"
    except OSError:
        pass
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} logical CPUs"


def run(name: str) -> tuple[str, float]:
    script = EXAMPLES / f"{name}.py"
    env = {**os.environ, "MPLBACKEND": "Agg", "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                                                      os.environ.get("PYTHONPATH")]))}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, str(script)], check=False, cwd=OUT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise SystemExit(f"gallery: examples/{name}.py failed (exit {done.returncode})")
    if not (OUT / f"{name}.png").exists():
        raise SystemExit(f"gallery: examples/{name}.py saved no {name}.png")
    return done.stdout, seconds


def page(name: str, output: str, seconds: float, cpu: str) -> str:
    source = (EXAMPLES / f"{name}.py").read_text()
    title, intro = _docstring(source)
    return "\n".join([
        f"# {title}", "", intro, "",
        f"Run it: `python examples/{name}.py` (writes `{name}.png` in the working directory).", "",
        f"![the figure examples/{name}.py makes]({name}.png)", "",
        f"Output of the documentation build ({seconds:.0f} s, compiles included; {cpu}, torch "
        f"{_torch_version()}):", "",
        "```text", output.rstrip(), "```", "",
        "## Source", "",
        "```python", source.rstrip(), "```", "",
    ])


def _torch_version() -> str:
    import importlib.metadata

    return importlib.metadata.version("torch")


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    cpu = _cpu()
    rows = []
    for name in ORDER:
        output, seconds = run(name)
        print(f"gallery: examples/{name}.py ran in {seconds:.1f} s", flush=True)
        (OUT / f"{name}.md").write_text(page(name, output, seconds, cpu))
        title, _ = _docstring((EXAMPLES / f"{name}.py").read_text())
        rows.append(f"| [{title}]({name}.md) | `examples/{name}.py` | {seconds:.0f} s |")
    index = ["# Gallery", "",
             "Plain scripts in `examples/`: each makes its own data, runs it through realify and "
             "draws a figure with matplotlib. The documentation build runs every one of them; the "
             f"times below are from this build ({cpu}), compiles included.", "",
             "| example | script | run time |", "|---|---|---|", *rows, ""]
    (OUT / "index.md").write_text("\n".join(index))
    return 0


if __name__ == "__main__":
    sys.exit(main())
