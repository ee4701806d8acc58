"""The Python snippets of README and of the user guide (docs/) run as written, each in a fresh
interpreter in an empty directory (a snippet that uses a name it does not define fails here).
README's two Errors snippets run together, as a reader reads them; the quickstart, export and
FSDP2 snippets compile with Inductor and AOTInductor (minutes on 2 cores) and run with the
slow tests. The gallery's scripts (examples/) run at each documentation build (make docs)."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def _snippets(path: pathlib.Path = README) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)


def _run(code: str, tmp_path: pathlib.Path) -> None:
    done = subprocess.run([sys.executable, "-c", code], check=False, cwd=tmp_path, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, f"snippet failed:\n{code}\n--- stderr ---\n{done.stderr[-4000:]}"


def test_readme_has_the_snippets_these_tests_run():
    snippets = _snippets()
    assert len(snippets) == 5, [s.splitlines()[0] for s in snippets]
    quickstart, export, errors, unwrapped, explain = snippets
    assert 'backend="realify"' in quickstart and "realify.export(" in export and "to_onnx(" in export
    assert "realify.compile(f, strict=True)(z)" in errors and "BackendCompilerFailed" in unwrapped
    assert "realify.explain(" in explain


def test_errors_snippets(tmp_path):
    _, _, first, second, _ = _snippets()
    _run(first + second, tmp_path)


def test_explain_snippet(tmp_path):
    _run(_snippets()[4], tmp_path)


def test_mixed_precision_snippet(tmp_path):
    (mixed,) = _snippets(ROOT / "docs" / "mixed-precision.md")
    assert "complex_autocast=True" in mixed
    _run(mixed, tmp_path)


def test_complex_tensor_snippet(tmp_path):
    (eager,) = _snippets(ROOT / "docs" / "complex-tensor.md")
    assert "realify.ComplexTensor(" in eager
    _run(eager, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("page, index", [("README.md", 0), ("README.md", 1), ("docs/distributed.md", 0)],
                         ids=["quickstart", "export-onnx-aoti", "fsdp2-real-pairs"])
def test_compiling_snippets(page, index, tmp_path):
    _run(_snippets(ROOT / page)[index], tmp_path)
