"""README's Python snippets run as written, each in a fresh interpreter in an empty directory
(a snippet that uses a name it does not define fails here). The Errors section's two
snippets run together, as a reader reads them; the quickstart, FSDP2 and export snippets compile
with Inductor and AOTInductor (minutes on 2 cores) and run with the slow tests."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


def _snippets() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def _run(code: str, tmp_path: pathlib.Path) -> None:
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"README snippet failed:\n{code}\n--- stderr ---\n{done.stderr[-4000:]}"


def test_readme_has_the_snippets_these_tests_run():
    snippets = _snippets()
    assert len(snippets) == 7, [s.splitlines()[0] for s in snippets]
    assert "realify.compile(f, strict=True)(z)" in snippets[1] and "BackendCompilerFailed" in snippets[2]


def test_errors_snippets(tmp_path):
    _, first, second, *_ = _snippets()
    _run(first + second, tmp_path)


def test_explain_snippet(tmp_path):
    explain = _snippets()[3]
    assert "realify.explain(" in explain
    _run(explain, tmp_path)


def test_mixed_precision_snippet(tmp_path):
    mixed = _snippets()[5]
    assert "complex_autocast=True" in mixed
    _run(mixed, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("index", [0, 4, 6], ids=["quickstart", "fsdp2-real-pairs", "export-onnx-aoti"])
def test_compiling_snippets(index, tmp_path):
    _run(_snippets()[index], tmp_path)
