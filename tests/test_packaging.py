"""Packaging: one version (pyproject.toml's, read back from the installed metadata), the license
as an SPDX expression, every third-party import declared, and each optional package's absence
reported as an ImportError that names the extra to install. The built sdist and wheel
themselves are checked by ``make artifact`` (.ci/check_artifact.py)."""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import pathlib
import re
import subprocess
import sys
import tomllib

import pytest

import realify
from realify._optional import import_optional

ROOT = pathlib.Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]

# what realify imports without declaring it: torch's own modules, and integrations that act only
# where their package is installed (realify/library_polyfills.py: opt_einsum's bookkeeping)
UNDECLARED = {"torch", "functorch", "torchgen", "opt_einsum"}
# import names whose distribution is named otherwise, where it is not installed to ask
DISTRIBUTION_OF = {"neuralop": "neuraloperator"}


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    return _canonical(re.match(r"[A-Za-z0-9_.-]+", requirement).group(0))


def _extra(name: str) -> set[str]:
    """The distributions an extra installs, its references to realify's other extras resolved."""
    names = set()
    for requirement in PROJECT["optional-dependencies"][name]:
        own = re.fullmatch(r"realify\[([a-z,_-]+)\]", requirement)
        if own:
            for other in own.group(1).split(","):
                names |= _extra(other)
        else:
            names.add(_requirement_name(requirement))
    return names


def test_version_is_pyprojects_read_from_the_installed_metadata():
    assert realify.__version__ == importlib.metadata.version("realify") == PROJECT["version"]
    assert "version" not in PROJECT.get("dynamic", [])


def test_citation_names_the_same_version_and_license():
    citation = (ROOT / "CITATION.cff").read_text()
    fields = dict(re.findall(r"^([a-z-]+): *\"?([^\"\n]*)\"?$", citation, flags=re.M))
    assert fields["cff-version"] == "1.2.0"
    assert fields["version"] == PROJECT["version"]
    assert fields["license"] == PROJECT["license"]
    assert fields["title"].startswith("realify")
    assert re.search(r"^authors:\n  - name: \"the realify authors\"$", citation, flags=re.M)


def test_license_is_an_spdx_expression_and_the_classifiers_name_this_python():
    assert PROJECT["license"] == "BSD-3-Clause" and PROJECT["license-files"] == ["LICENSE"]
    assert not any(c.startswith("License ::") for c in PROJECT["classifiers"])  # deprecated by PEP 639
    setuptools = next(r for r in PYPROJECT["build-system"]["requires"] if r.startswith("setuptools"))
    assert tuple(map(int, re.search(r">=([\d.]+)", setuptools).group(1).split("."))) >= (77, 0, 3)
    major, minor = sys.version_info[:2]
    assert f"Programming Language :: Python :: {major}.{minor}" in PROJECT["classifiers"]


def _imports() -> list[tuple[str, str, str | None, pathlib.Path]]:
    """(module, how, extra or None, file): each third-party candidate that realify's source
    imports, by an import statement or by name (``import_optional``, ``importlib.import_module``,
    the benchmarks' ``_package``), with the extra ``import_optional`` names."""
    found = []
    for path in sorted((ROOT / "realify").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found += [(alias.name, "import", None, path) for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.append((node.module, "import", None, path))
            elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str):
                func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if func not in ("import_optional", "import_module", "_package"):
                    continue
                extra = None
                if func == "import_optional":
                    extra = next((k.value.value for k in node.keywords if k.arg == "extra"), None)
                    if extra is None and len(node.args) > 1:
                        extra = node.args[1].value
                found.append((node.args[0].value, func, extra, path))
    return found


@functools.cache
def _installed_distributions() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()  # reads every RECORD: once


def _distribution(module: str) -> str:
    top = module.split(".")[0]
    installed = _installed_distributions().get(top)
    return _canonical(installed[0] if installed else DISTRIBUTION_OF.get(top, top))


def test_every_third_party_import_is_declared():
    declared = {_requirement_name(r) for r in PROJECT["dependencies"]}
    for extra in PROJECT["optional-dependencies"]:
        declared |= _extra(extra)
    missing = set()
    for module, how, _, path in _imports():
        top = module.split(".")[0]
        if top in sys.stdlib_module_names or top in UNDECLARED or top == "realify" or top == "__future__":
            continue
        if _distribution(module) not in declared:
            missing.add(f"{path.relative_to(ROOT)}: {how} {module} ({_distribution(module)})")
    assert not missing, "imported but declared neither as a dependency nor in an extra:\n" + "\n".join(sorted(missing))


def test_import_optional_names_an_extra_that_brings_the_package():
    calls = [(module, extra, path) for module, how, extra, path in _imports() if how == "import_optional"]
    assert calls, "no import_optional call found"
    for module, extra, path in calls:
        if module.startswith("torch."):  # a torch module that imports third-party packages: checked below
            continue
        assert extra in PROJECT["optional-dependencies"], f"{path}: no extra {extra!r}"
        assert _distribution(module) in _extra(extra), f"{path}: {module} is not in the {extra!r} extra"


def test_all_is_every_users_extra_and_none_of_the_developers():
    users = {"export", "bench", "models", "coverage"}
    assert users <= set(PROJECT["optional-dependencies"])
    assert _extra("all") == set().union(*(_extra(e) for e in users))
    assert not _extra("all") & {"pytest", "ruff", "mypy", "mkdocs", "twine", "build"}


def test_import_optional_raises_an_import_error_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "no_such_package", None)  # None in sys.modules: not importable
    with pytest.raises(ImportError, match=r"realify\.thing needs the package 'no_such_package'.*"
                                          r"pip install 'realify\[export\]'") as err:
        import_optional("no_such_package", "export", "realify.thing")
    assert isinstance(err.value.__cause__, ModuleNotFoundError)


def test_bench_plot_without_matplotlib_names_the_bench_extra(monkeypatch, tmp_path):
    from realify.bench import report

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r"'matplotlib'.*realify\[bench\]"):
        report.plot([], str(tmp_path / "plot.png"))


@pytest.mark.parametrize("package", ["numpy", "expecttest"])
def test_coverage_without_its_packages_names_the_coverage_extra(package, tmp_path):
    """``python -m realify coverage`` in an install without the extra: torch.testing's OpInfo
    table imports numpy and expecttest; the package is hidden in a fresh interpreter (a module
    that earlier tests imported stays imported in this one)."""
    code = (f"import sys; sys.modules[{package!r}] = None\n"
            "from realify.tools import cli\n"
            "sys.exit(cli.main(['coverage', '--only', 'abs', '--out', 'coverage.md']))")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          check=False)
    assert done.returncode == 2, done.stderr[-3000:]
    assert f"needs the package {package!r}" in done.stderr and "pip install 'realify[coverage]'" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "coverage.md").exists()
