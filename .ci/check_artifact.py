"""The artifact check (``make artifact``, a step of .ci/run): what ``pip install realify`` gets.

1. Build the sdist and, from it, the wheel (``python -m build``, an isolated build with the
   setuptools that pyproject.toml's [build-system] asks for); the build must print no warning.
2. Check their metadata strictly: ``twine check --strict``, then realify's own promises: the
   version is pyproject.toml's, the license an SPDX expression (``License-Expression``) with its
   file, no license classifier, a classifier for this Python, every extra, and the files each
   archive must carry.
3. Install the wheel into a fresh venv under /tmp with only its required dependencies (torch at
   the pin): ``pip check``, nothing installed beyond torch's own requirements, realify imported
   from there with pyproject's version, its entry points (the ``realify`` command's
   ``--version``, the dynamo backend), the optional tools refusing with the extra they need;
   then README's quickstart code block, run from an empty folder (the installed wheel, not the
   source tree).
4. Add each extra on its own (installed, ``pip check``, checked, then removed again, so that no
   extra lends its packages to the next) and run what needs it: ``export`` a tiny
   ``realify.export`` -> ``realify.onnx.to_onnx`` -> ONNX Runtime round trip, ``coverage``
   ``python -m realify coverage`` on two ops, ``bench`` ``python -m realify bench --plot`` on a
   tiny workload (``models``, its third-party workloads, only with ``--extras``: a large
   install).

torch in the fresh venv: PyPI's torch wheel brings several gigabytes of CUDA libraries, which
take about 5 minutes on 2 cores to download and unpack (pip's cache keeps no copy of them
here). With ``--torch-from VENV`` (the Makefile passes the venv it made for the same pin) the
installed files of torch and of every package it requires (read from their RECORDs, the same
distributions pip would install) are hard-linked into the fresh venv instead: pip then finds
torch==<pin> installed, as it would after installing it, and the check takes seconds for it.
Nothing writes into a linked file in place (pip replaces and removes files, Python writes new
bytecode files), so the source venv is left as it was. Without ``--torch-from``, or where that
venv lacks the pin, ``pip install torch==<pin>`` runs as the Makefile runs it (its
``--find-links`` and an empty ``PIP_CONSTRAINT``).

    python .ci/check_artifact.py --torch 2.15.0 [--torch-from .venv] [--find-links /opt/wheels]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import time
import tomllib
import zipfile
from email.parser import HeaderParser

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXTRAS_CHECKED = ("export", "coverage", "bench")

EXPORT_CHECK = """
import numpy as np
import onnxruntime
import torch

import realify
from realify.onnx import to_onnx


class Spectral(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.mix = torch.nn.Linear(8, 8, dtype=torch.complex64)

    def forward(self, z):
        return torch.fft.ifft(self.mix(torch.fft.fft(z)) * 0.5j)


torch.manual_seed(0)
model = Spectral()
x = torch.randn(2, 8, dtype=torch.complex64)
ep = realify.export(model, (x,))
to_onnx(ep, path="spectral.onnx")
session = onnxruntime.InferenceSession("spectral.onnx")
(y,) = session.run(None, {session.get_inputs()[0].name: torch.view_as_real(x).numpy()})
expected = torch.view_as_real(model(x)).detach().numpy()
np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-5)
print("export: realify.export -> realify.onnx.to_onnx -> ONNX Runtime matches eager")
"""


# in the fresh venv with the wheel alone: where realify comes from, its version, its entry
# points, and the optional tools' refusals, each naming its extra (one process: one torch import)
PLAIN_CHECK = """
import contextlib
import importlib.metadata
import io
import sys

import realify

venv, version, torch_version = sys.argv[1:]
assert realify.__file__.startswith(venv), f"realify was imported from {realify.__file__}, not the fresh venv"
assert realify.__version__ == version, f"realify.__version__ is {realify.__version__}, not {version}"
(backend,) = importlib.metadata.entry_points(group="torch_dynamo_backends", name="realify")
assert backend.load() is realify.realify_backend
(script,) = importlib.metadata.entry_points(group="console_scripts", name="realify")
printed = io.StringIO()
with contextlib.redirect_stdout(printed), contextlib.suppress(SystemExit):
    script.load()(["--version"])
assert printed.getvalue().startswith(f"realify {version} (torch {torch_version}"), printed.getvalue()

try:
    import realify.onnx

    realify.onnx.onnx_translation_table()
except ImportError as err:
    assert "pip install 'realify[export]'" in str(err), err
else:
    raise AssertionError("realify.onnx's translations ran without the export extra")
from realify.tools import cli

told = io.StringIO()
with contextlib.redirect_stderr(told):
    try:
        code = cli.main(["coverage", "--only", "abs", "--out", "coverage.md"])
    except SystemExit as stop:
        code = stop.code
assert code == 2 and "pip install 'realify[coverage]'" in told.getvalue(), (code, told.getvalue())
print(printed.getvalue().strip() + "; without their extras, realify.onnx's translations and python -m realify "
      "coverage refuse, naming realify[export] and realify[coverage]")
"""


class CheckFailed(Exception):
    pass


def _step(what: str):
    """Print what runs and, when it is done, how long it took."""

    @contextlib.contextmanager
    def timed():
        print(f"artifact: {what}", flush=True)
        start = time.perf_counter()
        yield
        print(f"artifact: {what}: {time.perf_counter() - start:.0f} s", flush=True)

    return timed()


def _run(cmd: list[str], *, cwd: pathlib.Path | None = None, env: dict[str, str] | None = None,
         expect_fail: bool = False, timeout: float = 900) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    if (done.returncode != 0) != expect_fail:
        raise CheckFailed(f"{' '.join(map(str, cmd))} exited with {done.returncode}"
                          f"{' (a failure was expected)' if expect_fail else ''}:\n"
                          f"{done.stdout[-3000:]}\n{done.stderr[-6000:]}")
    return done


def _pip_env() -> dict[str, str]:
    # a machine-wide constraint file may cap torch below the pin: the Makefile's empty constraint set
    return {**os.environ, "PIP_CONSTRAINT": "/dev/null", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


# --------------------------------------------------------------------------- 1-2: build and metadata
WARNING = re.compile(r"warning\b.*:|warning:|deprecat", re.I)


def build(dist: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    env = _pip_env()
    # where PYTHONDONTWRITEBYTECODE is set, setuptools notes "byte-compiling is disabled" as a
    # warning: about this machine, not the package (a wheel carries no bytecode)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    done = _run([sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)], env=env)
    warnings = [line for line in (done.stdout + done.stderr).splitlines() if WARNING.search(line)]
    if warnings:
        raise CheckFailed("the build printed warnings:\n" + "\n".join(warnings))
    (sdist,), (wheel,) = sorted(dist.glob("*.tar.gz")), sorted(dist.glob("*.whl"))
    return sdist, wheel


def _metadata(text: str) -> dict[str, list[str]]:
    message = HeaderParser().parsestr(text)
    fields: dict[str, list[str]] = {}
    for key, value in message.items():
        fields.setdefault(key, []).append(value)
    return fields


def check_metadata(sdist: pathlib.Path, wheel: pathlib.Path) -> None:
    _run([sys.executable, "-m", "twine", "check", "--strict", str(sdist), str(wheel)])
    project = _pyproject()
    version = project["version"]
    stem = f"realify-{version}"
    with zipfile.ZipFile(wheel) as whl:
        names = set(whl.namelist())
        wheel_meta = _metadata(whl.read(f"{stem}.dist-info/METADATA").decode())
        entry_points = whl.read(f"{stem}.dist-info/entry_points.txt").decode()
    with tarfile.open(sdist) as tar:
        sdist_names = {name.removeprefix(f"{stem}/") for name in tar.getnames()}
        member = tar.extractfile(f"{stem}/PKG-INFO")
        assert member is not None
        sdist_meta = _metadata(member.read().decode())
    problems = []
    python = f"Programming Language :: Python :: {sys.version_info.major}.{sys.version_info.minor}"
    for where, meta in (("wheel", wheel_meta), ("sdist", sdist_meta)):
        def expect(ok: bool, what: str, where: str = where) -> None:
            if not ok:
                problems.append(f"{where}: {what}")

        expect(meta.get("Version") == [version], f"Version {meta.get('Version')} is not pyproject's {version}")
        expect(tuple(map(int, meta["Metadata-Version"][0].split("."))) >= (2, 4),
               f"Metadata-Version {meta['Metadata-Version']}: PEP 639's license fields need 2.4")
        expect(meta.get("License-Expression") == [project["license"]],
               f"License-Expression {meta.get('License-Expression')}, not {project['license']}")
        expect(meta.get("License-File") == ["LICENSE"], f"License-File {meta.get('License-File')}")
        expect("License" not in meta, "a License field (the deprecated license table)")
        classifiers = meta.get("Classifier", [])
        expect(not any(c.startswith("License ::") for c in classifiers), "a license classifier")
        expect(python in classifiers, f"no classifier {python!r} for the Python the CI runs")
        expect(set(meta.get("Provides-Extra", [])) >= set(project["optional-dependencies"]),
               f"extras {meta.get('Provides-Extra')}")
        expect(meta.get("Requires-Python") == [project["requires-python"]], "Requires-Python")
        expect(meta.get("Description-Content-Type") == ["text/markdown"], "README is not text/markdown")
    for name in ("realify/__init__.py", "realify/py.typed", f"{stem}.dist-info/licenses/LICENSE"):
        if name not in names:
            problems.append(f"wheel: {name} is missing")
    if any(n.startswith(("tests/", "docs/", "examples/")) for n in names):
        problems.append("wheel: carries tests/, docs/ or examples/")
    if "realify = realify.backend:realify_backend" not in entry_points or "[torch_dynamo_backends]" not in entry_points:
        problems.append("wheel: no torch_dynamo_backends entry point")
    for name in ("LICENSE", "README.md", "CHANGELOG.md", "pyproject.toml", "realify/py.typed", "PKG-INFO"):
        if name not in sdist_names:
            problems.append(f"sdist: {name} is missing")
    if problems:
        raise CheckFailed("metadata:\n" + "\n".join(problems))
    print(f"artifact: {sdist.name} and {wheel.name}: twine check --strict passed; version {version}, "
          f"License-Expression BSD-3-Clause, License-File LICENSE, classifier {python!r}")


# --------------------------------------------------------------------------- 3: a fresh venv
def _site_packages(python: pathlib.Path) -> pathlib.Path:
    out = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout
    return pathlib.Path(out.strip())


def _installed(python: pathlib.Path) -> dict[str, str]:
    out = _run([str(python), "-m", "pip", "list", "--format=json"], env=_pip_env()).stdout
    return {_canonical(p["name"]): p["version"] for p in json.loads(out)}


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _torch_closure(site: pathlib.Path, torch_version: str) -> list | None:
    """torch==``torch_version`` installed in ``site`` and every distribution it requires there
    (markers evaluated for this interpreter), or None where ``site`` lacks that torch."""
    import importlib.metadata

    from packaging.requirements import Requirement

    dists = {_canonical(d.metadata["Name"]): d for d in importlib.metadata.distributions(path=[str(site)])}
    torch = dists.get("torch")
    if torch is None or torch.version.split("+")[0] != torch_version:
        return None
    closure: dict[str, object] = {}
    done: set[tuple[str, str]] = set()
    todo = [("torch", "")]  # (distribution, one of the extras asked of it, "" for its plain requirements)
    while todo:
        name, extra = todo.pop()
        if (name, extra) in done:
            continue
        done.add((name, extra))
        dist = dists.get(name)
        if dist is None:
            return None  # a requirement that venv lacks: install torch with pip instead
        closure[name] = dist
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": extra}):
                todo += [(_canonical(req.name), e) for e in ("", *req.extras)]
    return list(closure.values())


def link_torch(closure: list, target: pathlib.Path) -> int:
    """Hard-link each distribution's installed files (its RECORD, scripts outside
    site-packages left out) into the site-packages ``target``; copy where linking fails. A
    distribution the new venv has already (its own pip and setuptools) is left to pip."""
    import importlib.metadata

    present = {_canonical(d.metadata["Name"]) for d in importlib.metadata.distributions(path=[str(target)])}
    count = 0
    for dist in closure:
        if _canonical(dist.metadata["Name"]) in present:
            continue
        for file in dist.files or []:
            if ".." in file.parts:
                continue
            src, dst = pathlib.Path(dist.locate_file(file)), target / file
            if not src.is_file() or dst.exists():
                continue
            dst.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(src, dst)
            except OSError:
                shutil.copy2(src, dst)
            count += 1
    return count


def fresh_venv(work: pathlib.Path, args: argparse.Namespace) -> tuple[pathlib.Path, set[str]]:
    venv = work / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    closure = None
    if args.torch_from:
        source = args.torch_from / "bin" / "python"
        if source.exists():
            closure = _torch_closure(_site_packages(source), args.torch)
        if closure is None:
            print(f"artifact: {args.torch_from} has no torch=={args.torch}: installing it with pip")
    if closure is not None:
        files = link_torch(closure, _site_packages(python))
        print(f"artifact: torch=={args.torch} and its {len(closure) - 1} requirements linked from "
              f"{args.torch_from} ({files} files)")
    else:
        _run([str(python), "-m", "pip", "install", "-q", *args.pip_flags, f"torch=={args.torch}"], env=_pip_env(),
             timeout=1800)
    base = set(_installed(python))
    return python, base


def install(python: pathlib.Path, requirement: str, args: argparse.Namespace) -> None:
    _run([str(python), "-m", "pip", "install", "-q", *args.pip_flags, requirement, f"torch=={args.torch}"],
         env=_pip_env(), timeout=1200)


def quickstart() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Quickstart"):]
    return re.search(r"```python\n(.*?)```", section, flags=re.S).group(1)


def check_plain_install(python: pathlib.Path, wheel: pathlib.Path, work: pathlib.Path,
                        args: argparse.Namespace, torch_and_its_requirements: set[str]) -> None:
    install(python, str(wheel), args)
    _run([str(python), "-m", "pip", "check"], env=_pip_env())
    installed = set(_installed(python))
    extra = installed - torch_and_its_requirements - {"realify"}
    if extra:
        raise CheckFailed(f"the plain install brought packages beyond torch's requirements: {sorted(extra)}")
    folder = work / "plain"
    folder.mkdir()
    (folder / "plain_check.py").write_text(textwrap.dedent(PLAIN_CHECK))
    out = _run([str(python), "plain_check.py", str(python.parent.parent), _pyproject()["version"], args.torch],
               cwd=folder).stdout.strip()
    print(f"artifact: the wheel installs alone (pip check passed, nothing beyond torch=={args.torch}'s "
          f"requirements): {out}")


def run_quickstart(python: pathlib.Path, work: pathlib.Path) -> None:
    folder = work / "quickstart"
    folder.mkdir()
    (folder / "quickstart.py").write_text(quickstart())
    _run([str(python), "quickstart.py"], cwd=folder, timeout=1200)


# --------------------------------------------------------------------------- 4: each extra on its own
def check_extra(name: str, python: pathlib.Path, wheel: pathlib.Path, work: pathlib.Path,
                args: argparse.Namespace, last: bool) -> None:
    before = set(_installed(python))
    install(python, f"{wheel}[{name}]", args)
    _run([str(python), "-m", "pip", "check"], env=_pip_env())
    added = sorted(set(_installed(python)) - before)
    folder = work / f"extra-{name}"
    folder.mkdir()
    if name == "export":
        (folder / "export_check.py").write_text(textwrap.dedent(EXPORT_CHECK))
        print("artifact: " + _run([str(python), "export_check.py"], cwd=folder).stdout.strip())
    elif name == "coverage":
        _run([str(python), "-m", "realify", "coverage", "--only", "abs", "angle", "--front-ends", "eager", "decompose",
              "--out", "coverage.md"], cwd=folder)
        report = (folder / "coverage.md").read_text()
        if "| `abs` |" not in report:
            raise CheckFailed(f"python -m realify coverage wrote no row for abs:\n{report[:2000]}")
        print("artifact: coverage: python -m realify coverage --only abs angle ran")
    elif name == "bench":
        _run([str(python), "-m", "realify", "bench", "--size", "tiny", "--only", "docs-chain", "--modes",
              "eager,realify-eager", "--repeat", "2", "--warmup", "1", "--plot", "bench.png", "--no-progress"],
             cwd=folder)
        if (folder / "bench.png").read_bytes()[:8] != b"\x89PNG\r\n\x1a\n":
            raise CheckFailed("python -m realify bench --plot wrote no PNG")
        print("artifact: bench: python -m realify bench --plot drew its chart")
    elif name == "models":
        done = _run([str(python), "-m", "realify", "bench", "--size", "tiny", "--only",
                     "neuralop-fno,complextorch-cnn,auraloss-mrstft", "--modes", "eager,realify-eager",
                     "--repeat", "1", "--warmup", "0", "--no-progress"], cwd=folder)
        if "skipped" in done.stdout:
            raise CheckFailed(f"a third-party workload was skipped with the models extra installed:\n{done.stdout}")
        print("artifact: models: the third-party workloads ran")
    else:
        raise CheckFailed(f"no check for the extra {name!r}")
    if added and not last:  # the next extra starts from the plain install again
        _run([str(python), "-m", "pip", "uninstall", "-q", "-y", *added], env=_pip_env())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch", required=True, help="the torch release to install (the Makefile's default pin)")
    parser.add_argument("--torch-from", type=pathlib.Path,
                        help="a venv with that torch installed, whose files are linked into the fresh venv")
    parser.add_argument("--find-links", action="append", default=[], metavar="DIR",
                        help="pip's --find-links for torch (the Makefile's PIP_FLAGS)")
    parser.add_argument("--extras", default=",".join(EXTRAS_CHECKED),
                        help=f"comma-separated extras to check, each on its own (default {','.join(EXTRAS_CHECKED)}; "
                             "also: models)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (printed)")
    args = parser.parse_args(argv)
    args.pip_flags = [flag for d in args.find_links for flag in ("--find-links", d)]
    start = time.perf_counter()
    work = pathlib.Path(tempfile.mkdtemp(prefix="realify-artifact-", dir="/tmp"))
    try:
        with _step("build the sdist and the wheel"):
            sdist, wheel = build(work / "dist")
        with _step("check their metadata"):
            check_metadata(sdist, wheel)
        with _step(f"a fresh venv with torch=={args.torch}"):
            python, torch_and_its_requirements = fresh_venv(work, args)
        with _step("install the wheel alone"):
            check_plain_install(python, wheel, work, args, torch_and_its_requirements)
        with _step("README's quickstart"):
            run_quickstart(python, work)
        extras = [e.strip() for e in args.extras.split(",") if e.strip()]
        for i, name in enumerate(extras):
            with _step(f"the {name} extra"):
                check_extra(name, python, wheel, work, args, last=i == len(extras) - 1)
    except CheckFailed as err:
        print(f"artifact: FAILED: {err}", file=sys.stderr)
        return 1
    finally:
        if args.keep:
            print(f"artifact: kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(f"artifact: passed in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
