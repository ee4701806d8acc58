"""Saved programs stay callable with complex tensors.

realify.export records which inputs and outputs are complex (the Boundary) as versioned JSON
inside the program (``ep.graph_module.meta["custom"]["realify.boundary"]``, which
torch.export.save writes), and realify.aoti_compile_and_package copies it into an AOTInductor
package's metadata. Each program here is saved to a file, loaded in a fresh Python process
(nothing of the exporting process left), called through ComplexCallAdapter with complex
tensors, and compared there with eager's outputs, which travel through a file too.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import textwrap
import time

import pytest
import torch
import torch.nn as nn

import realify
from realify.runtime.aliasing import OutputView
from realify.saved_programs import DESCRIPTION_KEY, DESCRIPTION_VERSION, describe, read_description

C64, C128 = torch.complex64, torch.complex128


class LinearExp(nn.Module):
    """A complex Linear, exp, a real output, and a complex input that arrives as a conj view."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3, dtype=C64)

    def forward(self, z, w, r):
        y = self.lin(z).exp()
        return y + w, (y.abs() * r).sum(-1)


def linear_exp_inputs():
    """The example inputs, and the tensors they are made of (saved for the fresh process, which
    makes ``w`` the same way: the conj bit and the strides are the point)."""
    z = torch.randn(2, 4, dtype=C64)
    w_base = torch.randn(3, 2, dtype=C64)
    r = torch.randn(2, 3)
    return (z, w_base.conj().mT, r), (z, w_base, r)


def run_fresh(code: str, cwd) -> str:
    """``code`` in a new Python process in ``cwd``; its stdout (fails with its stderr)."""
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], check=False, cwd=cwd,
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-6000:]
    return result.stdout


# in the fresh process: the inputs rebuilt, the adapter's outputs against eager's
CHECK_LINEAR_EXP = """
    import torch, realify
    (z, w_base, r), expected = torch.load("io.pt")
    w = w_base.conj().mT
    assert w.is_conj() and not w.is_contiguous()
    for adapter in ({adapters}):
        got = adapter(z, w, r)
        assert isinstance(got, tuple) and len(got) == 2, got
        assert got[0].dtype == torch.complex64 and got[1].dtype == torch.float32
        for g, e in zip(got, expected):
            torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)
    print("checked", len(({adapters},)))
"""


def test_saved_program_called_with_complex_tensors_in_a_fresh_process(tmp_path):
    torch.manual_seed(0)
    model = LinearExp()
    args, parts = linear_exp_inputs()
    ep = realify.export(model, args)
    torch.export.save(ep, tmp_path / "model.pt2")
    with torch.no_grad():
        torch.save((parts, model(*args)), tmp_path / "io.pt")
    del ep  # nothing of it in the file but what torch.export.save wrote
    out = run_fresh(CHECK_LINEAR_EXP.format(adapters=(
        'realify.ComplexCallAdapter(torch.export.load("model.pt2")), realify.ComplexCallAdapter.load("model.pt2")')),
        tmp_path)
    assert "checked 2" in out


def test_saved_program_writes_inputs_and_returns_views_in_a_fresh_process(tmp_path):
    """The rest of the description over a save: an input written in place, an output that is a
    view of an input (eager's memory sharing), complex128 carried as float32 pairs
    (truncate_double), and keyword arguments."""

    def f(z, acc, *, w):
        acc.add_(z * w)
        return z[1:], (acc * w).exp()

    torch.manual_seed(0)
    z, acc, w = torch.randn(3, 2, dtype=C128), torch.randn(3, 2, dtype=C128), torch.randn(3, 2, dtype=C128)
    ep = realify.export(f, (z, acc.clone()), {"w": w}, truncate_double=True)
    torch.export.save(ep, tmp_path / "model.pt2")
    expected_acc = acc.clone()
    expected = f(z, expected_acc, w=w)
    torch.save(((z, acc, w), (expected, expected_acc)), tmp_path / "io.pt")
    out = run_fresh("""
        import torch, realify
        (z, acc, w), ((view, y), new_acc) = torch.load("io.pt")
        adapter = realify.ComplexCallAdapter.load("model.pt2")
        assert adapter.signature.pair_dtypes == {torch.complex128: torch.float32}, adapter.signature
        assert adapter.signature.mutated_inputs == (1,), adapter.signature
        got_view, got_y = adapter(z, acc, w=w)
        assert got_view.data_ptr() == z[1:].data_ptr() and got_view.stride() == z[1:].stride()
        torch.testing.assert_close(got_view, view)
        torch.testing.assert_close(acc, new_acc, rtol=1e-5, atol=1e-5)  # written in place, in single precision
        assert got_y.dtype == torch.complex128
        torch.testing.assert_close(got_y, y, rtol=1e-5, atol=1e-5)
        print("ok")
    """, tmp_path)
    assert "ok" in out


@pytest.mark.slow  # AOTInductor's C++ build: 70 to 90 s on two shared cores (compile and package 45 to 60 s)
def test_aoti_package_called_with_complex_tensors_in_a_fresh_process(tmp_path):
    torch.manual_seed(0)
    model = LinearExp()
    args, parts = linear_exp_inputs()
    ep = realify.export(model, args)
    with torch.no_grad():
        torch.save((parts, model(*args)), tmp_path / "io.pt")
    start = time.perf_counter()
    path = realify.aoti_compile_and_package(
        ep, package_path=str(tmp_path / "model_aoti.pt2"),
        # the caller's inductor options and metadata are kept (an unoptimized wrapper: a faster compile)
        inductor_configs={"aot_inductor.compile_wrapper_opt_level": "O0", "aot_inductor.metadata": {"owner": "test"}})
    print(f"AOTInductor compile and package: {time.perf_counter() - start:.1f} s")
    assert path == str(tmp_path / "model_aoti.pt2")
    out = run_fresh(CHECK_LINEAR_EXP.format(adapters=(
        'realify.ComplexCallAdapter.load("model_aoti.pt2"), '
        'realify.ComplexCallAdapter(torch._inductor.aoti_load_package("model_aoti.pt2"))')) + """
    import torch._inductor
    assert torch._inductor.aoti_load_package("model_aoti.pt2").get_metadata()["owner"] == "test"
    """, tmp_path)
    assert "checked 2" in out


# ---- what is refused, and how --------------------------------------------------------------


def test_plain_torch_export_program_is_refused(tmp_path):
    ep = torch.export.export(nn.Linear(2, 2), (torch.randn(1, 2),))
    torch.export.save(ep, tmp_path / "plain.pt2")
    for program in (ep, torch.export.load(tmp_path / "plain.pt2")):
        with pytest.raises(realify.RealifyError, match=r"carries no realify description") as info:
            realify.ComplexCallAdapter(program)
        assert "realify.export(program, args)" in str(info.value)
    with pytest.raises(realify.RealifyError, match=r"carries no realify description"):
        realify.ComplexCallAdapter.load(tmp_path / "plain.pt2")
    with pytest.raises(realify.RealifyError, match=r"carries no realify description"):
        realify.aoti_compile_and_package(ep)  # before any compile


class _AOTIModelWithoutDescription:
    """What ``torch._inductor.aoti_load_package`` returns for a package that
    ``torch._inductor.aoti_compile_and_package`` made itself: a call spec, torch's metadata only
    (compiling one takes a minute; the adapter reads nothing else before it refuses)."""

    def __init__(self, ep):
        spec = ep.call_spec
        self.loader = type("Loader", (), {"get_call_spec": lambda _: [
            torch.utils._pytree.treespec_dumps(spec.in_spec), torch.utils._pytree.treespec_dumps(spec.out_spec)]})()

    def get_metadata(self):
        return {"AOTI_DEVICE_KEY": "cpu"}

    def __call__(self, *args, **kwargs):
        raise AssertionError("not called")


def test_aoti_package_without_description_is_refused():
    ep = realify.export(LinearExp(), linear_exp_inputs()[0])
    with pytest.raises(realify.RealifyError, match=r"AOTInductor model carries no realify description") as info:
        realify.ComplexCallAdapter(_AOTIModelWithoutDescription(ep))
    assert "realify.aoti_compile_and_package(ep, package_path=...)" in str(info.value)
    # the original's signature still works for such a package
    adapter = realify.ComplexCallAdapter(_AOTIModelWithoutDescription(ep), realify.ComplexCallAdapter(ep).signature)
    assert adapter.signature.inputs == (C64, C64, None)


def _saved_with_description(tmp_path, edit):
    """A program made by realify.export, its description edited, saved and loaded again."""
    ep = realify.export(LinearExp(), linear_exp_inputs()[0])
    custom = ep.graph_module.meta["custom"]
    custom[DESCRIPTION_KEY] = edit(custom[DESCRIPTION_KEY])
    torch.export.save(ep, tmp_path / "model.pt2")
    return torch.export.load(tmp_path / "model.pt2")


def test_unknown_description_version_is_refused(tmp_path):
    def future(text):
        return json.dumps({**json.loads(text), "version": DESCRIPTION_VERSION + 1, "written_by": "realify 9.0"})

    loaded = _saved_with_description(tmp_path, future)
    with pytest.raises(realify.RealifyError, match=rf"version {DESCRIPTION_VERSION + 1}\b") as info:
        realify.ComplexCallAdapter(loaded)
    message = str(info.value)
    assert "realify 9.0" in message and f"reads version {DESCRIPTION_VERSION} only" in message
    assert "export and save the complex program again" in message


@pytest.mark.parametrize("edit, match", [
    (lambda text: "{not json", r"not JSON"),
    (lambda text: json.dumps({"version": DESCRIPTION_VERSION}), r"not a realify boundary description"),
    (lambda text: json.dumps({k: v for k, v in json.loads(text).items() if k != "outputs"}),
     r"malformed realify boundary description .*KeyError"),
    (lambda text: json.dumps({**json.loads(text), "inputs": ["complex64", "quaternion", None]}),
     r"malformed .*unknown dtype 'quaternion'"),
    (lambda text: json.dumps({**json.loads(text), "inputs": ["complex64"]}),
     r"does not fit this program: it describes 1 inputs"),
], ids=["not-json", "other-format", "missing-field", "unknown-dtype", "other-program"])
def test_broken_description_is_refused(tmp_path, edit, match):
    with pytest.raises(realify.RealifyError, match=match):
        realify.ComplexCallAdapter(_saved_with_description(tmp_path, edit))


def test_load_refuses_what_is_not_a_program(tmp_path):
    (tmp_path / "notes.pt2").write_text("not an archive")
    with pytest.raises(realify.RealifyError, match=r"is not a \.pt2 archive"):
        realify.ComplexCallAdapter.load(tmp_path / "notes.pt2")
    with pytest.raises(TypeError, match=r"ComplexCallAdapter takes"):
        realify.ComplexCallAdapter(nn.Linear(2, 2))


# ---- the description itself ----------------------------------------------------------------


def test_description_round_trips_every_boundary_field():
    """Every field of Boundary travels, with a value other than its default: a field added to
    Boundary fails here until the description carries it (and its version is raised)."""
    view = OutputView(input=1, dtype=torch.float64, size=(2, 3), stride=(6, 1), offset=4, conj=True, whole=False,
                      from_output=True, detached=True)
    boundary = realify.Boundary(
        inputs=(C64, None, C128), outputs=(None, C128), mutated_inputs=(0, 2), out_spec=None,
        input_layout=("interleaved", "planar", "interleaved"), output_layout="planar",
        output_views=(view, None), output_strides=((3, 1), None), eager_outputs=True,
        pair_dtypes={C128: torch.float32}, contiguous_pairs=True, written_regions=(((0, 1, 3, 1), (1, 0, 2, 2)), None),
        hidden_writes=frozenset({2}))
    defaults = realify.Boundary(inputs=(), outputs=())
    changed = {f.name for f in dataclasses.fields(boundary) if getattr(boundary, f.name) != getattr(defaults, f.name)}
    assert changed | {"out_spec"} == {f.name for f in dataclasses.fields(boundary)}
    text = describe(boundary)
    assert read_description(text) == boundary
    description = json.loads(text)
    assert description["format"] == "realify.boundary" and description["version"] == DESCRIPTION_VERSION
    assert set(description) - {"format", "version", "written_by"} | {"out_spec"} == changed | {"out_spec"}


def test_export_records_the_description_in_the_graph_custom_metadata():
    ep = realify.export(LinearExp(), linear_exp_inputs()[0])
    adapter = realify.ComplexCallAdapter(ep)
    text = ep.graph_module.meta["custom"][DESCRIPTION_KEY]
    assert read_description(text, ep.call_spec.out_spec) == adapter.signature
    # kept where torch's own passes rebuild the graph module
    decomposed = ep.run_decompositions()
    assert decomposed.graph_module.meta["custom"][DESCRIPTION_KEY] == text
