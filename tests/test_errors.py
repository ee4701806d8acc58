"""Errors a user can catch and place: realify's own exception types from every entry point,
naming the user's source line and advice that entry point can follow, and calls of exported
programs with the wrong kind of input named before the real program fails inside.

Each case also runs the corrected call and compares it with eager complex PyTorch."""

from __future__ import annotations

import inspect
import re
import warnings

import pytest
import torch
from no_rule_ops import PHASE_TWIST, phase_twist

import realify

C64, C128 = torch.complex64, torch.complex128


def randc(*shape, dtype=C64):
    return torch.randn(*shape, dtype=dtype)


def line_of(fn, text: str) -> str:
    """``file:line`` of the first line of ``fn`` holding ``text``."""
    lines, first = inspect.getsourcelines(fn)
    for offset, line in enumerate(lines):
        if text in line:
            return f"{inspect.getsourcefile(fn)}:{first + offset}"
    raise AssertionError(f"{text!r} not in {fn.__name__}")


def twist_of_double(z):
    y = z * 2
    return phase_twist(y)  # a user's custom op on complex tensors: no planar rule


def helper_without_rule(y):
    return phase_twist(y)


def calls_helper(z):
    return helper_without_rule(z + 1)


class CallsHelper(torch.nn.Module):
    def forward(self, z):
        return helper_without_rule(z - 1)


# ---- realify.compile: the realify error itself --------------------------------------------


@pytest.mark.usefixtures("fresh_dynamo")
def test_compile_strict_raises_missing_rule_error_itself():
    z = randc(3, 3)
    with pytest.raises(realify.MissingRuleError) as info:
        realify.compile(twist_of_double, inner="eager", strict=True)(z)
    err = info.value
    assert err.op is torch.ops.realify_tests.phase_twist.default
    assert line_of(twist_of_double, "phase_twist(y)") in err.where
    assert isinstance(err.__cause__, torch._dynamo.exc.BackendCompilerFailed)  # chained, not lost
    assert "strict=False" in str(err)  # advice this entry point has
    # that advice works: the op runs as an eager island and matches eager
    torch._dynamo.reset()
    with warnings.catch_warnings():  # the island warning comes once per op and process
        warnings.simplefilter("ignore")
        got = realify.compile(twist_of_double, inner="eager", strict=False)(z)
    torch.testing.assert_close(got, twist_of_double(z), rtol=1e-4, atol=1e-4)


@pytest.mark.usefixtures("fresh_dynamo")
def test_compile_decorator_and_module_raise_missing_rule_error():
    z = randc(3, 3)
    decorated = realify.compile(inner="eager", strict=True)(calls_helper)
    with pytest.raises(realify.MissingRuleError, match=re.escape(PHASE_TWIST)) as info:
        decorated(z)
    assert line_of(helper_without_rule, "phase_twist(y)") in info.value.where

    torch._dynamo.reset()
    module = realify.compile(CallsHelper(), inner="eager", strict=True)
    assert isinstance(module, torch.nn.Module)  # still a module (parameters, state_dict)
    with pytest.raises(realify.MissingRuleError, match=re.escape(PHASE_TWIST)):
        module(z)


@pytest.mark.usefixtures("fresh_dynamo")
def test_compile_other_errors_are_not_rewrapped():
    """Only realify's errors are unwrapped: a user's own error inside the program reaches the
    caller as it does from eager (dynamo re-raises those itself), and a working program's
    result matches eager."""

    def program(z):
        if z.shape[0] == 3:
            raise ValueError("the user's own error")
        return (z * 1j).exp()

    compiled = realify.compile(program, inner="eager")
    with pytest.raises(ValueError, match="the user's own error"):
        compiled(randc(3))
    z = randc(4)
    torch.testing.assert_close(compiled(z), program(z))


# ---- decompose and export: the user's line, and advice each entry point has -----------------


def test_decompose_names_the_source_line_and_its_own_advice():
    z = randc(3, 3)
    with pytest.raises(realify.MissingRuleError) as info:
        realify.decompose(twist_of_double, [z])
    err, message = info.value, str(info.value)
    assert line_of(twist_of_double, "phase_twist(y)") in err.where
    assert "graph node" not in message
    assert "strict=False" not in message  # decompose has no strict argument
    assert "on_missing" in message and "realify.compile" in message
    assert "While executing" not in message  # no interpreter noise after the advice
    # the advice: realify.compile runs the program, the op as an island, as eager does
    torch._dynamo.reset()
    with warnings.catch_warnings():  # the island warning comes once per op and process
        warnings.simplefilter("ignore")
        got = realify.compile(twist_of_double, inner="eager")(z)
    torch.testing.assert_close(got, twist_of_double(z), rtol=1e-4, atol=1e-4)
    torch._dynamo.reset()


def test_decompose_names_the_innermost_user_line():
    with pytest.raises(realify.MissingRuleError) as info:
        realify.decompose(calls_helper, [randc(3, 3)])
    assert line_of(helper_without_rule, "phase_twist(y)") in info.value.where
    # and the source lines recorded for a program that decomposes change nothing in its result
    z = randc(5)
    gm = realify.decompose(lambda v: (v * 2).exp().sum(), [z])
    torch.testing.assert_close(gm(z)[0], (z * 2).exp().sum())


def test_export_names_the_source_line():
    z = randc(3, 3)
    with pytest.raises(realify.MissingRuleError) as info:
        realify.export(twist_of_double, (z,))
    message = str(info.value)
    assert line_of(twist_of_double, "phase_twist(y)") in info.value.where
    assert "exported program cannot call back into eager" in message
    assert "strict=False" not in message and "on_missing" not in message
    # torch.export records an nn.Module's forward line (non-strict) or the innermost line (strict)
    with pytest.raises(realify.MissingRuleError) as info:
        realify.export(CallsHelper(), (z,))
    assert line_of(CallsHelper.forward, "helper_without_rule(z - 1)") in info.value.where
    with pytest.raises(realify.MissingRuleError) as info:
        realify.export(CallsHelper(), (z,), strict=True)
    assert line_of(helper_without_rule, "phase_twist(y)") in info.value.where


# ---- calling exported programs with the wrong inputs ----------------------------------------


def product(a, b):
    return a @ b


@pytest.fixture(scope="module")
def exported_product():
    a, b = randc(3, 4), randc(4, 2)
    return realify.export(product, (a, b)), a, b


def test_adapter_names_a_wrong_complex_dtype(exported_product):
    ep, a, b = exported_product
    adapter = realify.ComplexCallAdapter(ep)
    with pytest.raises(realify.RealifyError, match=r"args\[0\] is a torch.complex128 tensor.*exported for "
                                                   r"torch.complex64.*args\[0\].to\(torch.complex64\)"):
        adapter(a.to(C128), b)
    torch.testing.assert_close(adapter(a.to(C128).to(C64), b), product(a, b))


def test_adapter_names_real_and_complex_in_the_wrong_places(exported_product):
    ep, a, b = exported_product
    adapter = realify.ComplexCallAdapter(ep)
    with pytest.raises(realify.RealifyError, match=r"args\[1\] is a real torch.float32 tensor.*view_as_complex"):
        adapter(a, b.real.contiguous())
    with pytest.raises(realify.RealifyError, match=r"kwargs\['scale'\] is a torch.complex64 tensor.*real value"):
        ep_scaled = realify.export(lambda x, scale: x * scale, (a,), {"scale": torch.tensor(2.0)})
        realify.ComplexCallAdapter(ep_scaled)(a, scale=torch.tensor(2.0 + 0j, dtype=C64))
    torch.testing.assert_close(realify.ComplexCallAdapter(ep_scaled)(a, scale=torch.tensor(3.0)), a * 3.0)


def test_exported_module_names_a_complex_input(exported_product):
    ep, a, b = exported_product
    module = ep.module()
    with pytest.raises(realify.RealifyError, match=r"args\[0\] is a torch.complex64 tensor.*real \(\.\.\., 2\) "
                                                   r"torch.float32.*torch.view_as_real\(args\[0\]\).*ComplexCallAdapter"):
        module(a, torch.view_as_real(b))
    with pytest.raises(realify.RealifyError, match=r"args\[1\] is a torch.float64 tensor of shape \(4, 2, 2\)"):
        module(torch.view_as_real(a), torch.view_as_real(b).double())
    got = module(torch.view_as_real(a), torch.view_as_real(b))
    torch.testing.assert_close(torch.view_as_complex(got), product(a, b))


def _transposes_z_in_place(z, x):
    return z.t_() * x.sum()


def _transposes_x_in_place(z, x):
    return z * x.t_()[0, 0]


_WITH_OUT_OF_PLACE_VIEW = {_transposes_z_in_place: lambda z, x: z.t() * x.sum(),
                           _transposes_x_in_place: lambda z, x: z * x.t()[0, 0]}


def _squeezes_without_size_one_dims(z, x):
    return z.squeeze_() * x  # no size-1 dims: the caller's z keeps its shape


@pytest.mark.parametrize("entry", ["export", "decompose"])
@pytest.mark.parametrize("program, name",
                         [(_transposes_z_in_place, "input 0 (z)"), (_transposes_x_in_place, "input 1 (x)")],
                         ids=["complex input", "real input"])
def test_a_program_that_changes_an_inputs_shape_in_place_gets_a_named_error(entry, program, name):
    # eager changes the caller's tensor to (4, 3); a real-only graph cannot: realify names the
    # input instead of failing inside its trace (it raised a shape mismatch from fake tensors)
    z, x = randc(3, 4), torch.randn(3, 4)
    entry_point = realify.export if entry == "export" else realify.decompose
    with pytest.raises(realify.InputMetadataChangeError,
                       match=rf"{re.escape(name)} in place, from \(3, 4\) to \(4, 3\)"):
        entry_point(program, [z, x] if entry == "decompose" else (z, x))
    # what the message advises, the out-of-place view, exports and matches eager
    fixed = _WITH_OUT_OF_PLACE_VIEW[program]
    ep = realify.export(fixed, (z, x))
    torch.testing.assert_close(realify.ComplexCallAdapter(ep)(z, x), fixed(z, x))


def test_an_in_place_view_that_changes_nothing_still_exports():
    z, x = randc(3, 4), torch.randn(3, 4)
    ep = realify.export(_squeezes_without_size_one_dims, (z.clone(), x))
    got_z, expected_z = z.clone(), z.clone()
    torch.testing.assert_close(realify.ComplexCallAdapter(ep)(got_z, x), _squeezes_without_size_one_dims(expected_z, x))
    assert got_z.shape == expected_z.shape == (3, 4) and torch.equal(got_z, expected_z)


def test_compile_changes_the_callers_tensor_as_eager_does():
    z, x = randc(3, 4), torch.randn(3, 4)
    got_z, expected_z = z.clone(), z.clone()
    torch.testing.assert_close(realify.compile(_transposes_z_in_place)(got_z, x), _transposes_z_in_place(expected_z, x))
    assert got_z.shape == expected_z.shape and got_z.stride() == expected_z.stride() and torch.equal(got_z, expected_z)


# ---- ComplexTensor(re, im) given parts it cannot take -----------------------------------------


def test_complex_tensor_of_complex_parts_says_to_pass_real_and_imaginary_parts():
    z = randc(3)
    with pytest.raises(TypeError) as info:
        realify.ComplexTensor(z, torch.zeros(3))
    message = str(info.value)
    assert "torch.complex64" in message and "z.real, z.imag" in message and "from_complex(z)" in message
    assert ".to(torch.float32)" not in message  # a cast would drop the imaginary part
    # what it advises keeps every value
    assert torch.equal(realify.ComplexTensor(z.real, z.imag).to_complex(), z)
    assert torch.equal(realify.ComplexTensor.from_complex(z).to_complex(), z)


def test_complex_tensor_of_integer_or_mixed_parts_says_what_to_cast():
    with pytest.raises(TypeError, match=r"re=torch.int64.*re.to\(torch.float32\)"):
        realify.ComplexTensor(torch.arange(3), torch.arange(3))
    with pytest.raises(TypeError, match=r"one dtype, got re=torch.float32, im=torch.float64.*im.to\(re.dtype\)"):
        realify.ComplexTensor(torch.randn(3), torch.randn(3, dtype=torch.float64))
    with pytest.raises(TypeError, match=r"two real tensors, got re: float"):
        realify.ComplexTensor(1.0, torch.randn(3))


@pytest.mark.parametrize("shape", [(), (4, 3), (4, 1), (2, 0)])
def test_complex_tensor_from_pairs_names_a_last_dim_other_than_two(shape):
    expected = rf"\(\.\.\., 2\) tensor of \(re, im\) pairs, got shape {re.escape(str(shape))}"
    with pytest.raises(ValueError, match=expected):
        realify.ComplexTensor.from_pairs(torch.zeros(shape))
    pairs = torch.tensor([[1.0, -0.0], [float("inf"), 2.0]])
    assert torch.equal(torch.view_as_real(realify.ComplexTensor.from_pairs(pairs).to_complex()), pairs)


# ---- realify.compile's arguments, checked when it is called ------------------------------------


@pytest.mark.parametrize("arguments, error, words", [
    ({"inner": "inductr"}, ValueError, ["inner='inductr'", "did you mean 'inductor'", "'eager'", "callable"]),
    ({"inner": 3}, TypeError, ["inner=3", "'inductor'", "callable"]),
    ({"strict": "yes"}, TypeError, ["strict='yes'", "True", "False", "None"]),
    ({"inner_options": ["max_autotune"]}, TypeError, ["inner_options=", "dict"]),
    ({"inner_options": {"max_autotun": True}}, ValueError, ["'max_autotun'", "did you mean 'max_autotune'",
                                                            "torch._inductor.list_options()"]),
    ({"inner_options": {"max_autotune": "yes"}}, TypeError, ["'max_autotune'", "'yes'", "bool"]),
    ({"mode": "max-autotun"}, ValueError, ["mode='max-autotun'", "did you mean 'max-autotune'", "'reduce-overhead'"]),
    ({"options": {"triton.cudagraph": True}}, ValueError, ["'triton.cudagraph'", "did you mean 'triton.cudagraphs'"]),
    ({"inner": "eager", "mode": "max-autotune"}, ValueError, ["inner='eager'", "no options", "'mode'"]),
    ({"dynamic": "yes"}, TypeError, ["dynamic='yes'", "True", "None"]),
    ({"fullgraph": 1}, TypeError, ["fullgraph=1", "True or False"]),
    ({"stict": True}, TypeError, ["'stict'", "did you mean 'strict'"]),
    ({"backend": "inductor"}, TypeError, ["backend", "inner="]),
], ids=lambda v: str(v) if not isinstance(v, list) else "")
def test_compile_refuses_a_bad_argument_when_called(arguments, error, words):
    # raised by realify.compile itself, not at the first call inside dynamo's wrapper
    with pytest.raises(error) as info:
        realify.compile(lambda z: z * 2, **arguments)
    for word in words:
        assert word in str(info.value), (word, str(info.value))


@pytest.mark.usefixtures("fresh_dynamo")
def test_compile_accepts_every_kind_of_inner_compiler_and_option():
    z = randc(3)
    for arguments in ({"inner": "eager"}, {"inner": "aot_eager"}, {"inner": lambda gm, example_inputs: gm.forward},
                      {"inner": "inductor", "mode": "max-autotune-no-cudagraphs"},
                      {"inner_options": {"max_autotune": False}}, {"strict": True, "dynamic": False},
                      {"name": "labelled"}):
        compiled = realify.compile(lambda v: v * 2, **arguments)
        if arguments.get("inner") in ("eager", "aot_eager") or callable(arguments.get("inner")):
            torch.testing.assert_close(compiled(z), z * 2)  # the others would compile with Inductor: minutes
        torch._dynamo.reset()


@pytest.mark.usefixtures("fresh_dynamo")
def test_backend_named_in_torch_compile_names_a_bad_mode():
    # torch.compile(backend="realify") checks nothing before the first call; the error then says what is wrong
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed) as info:
        torch.compile(lambda z: z * 2, backend="realify", mode="max-autotun")(randc(3))
    assert isinstance(info.value.inner_exception, ValueError)
    assert "did you mean 'max-autotune'" in str(info.value.inner_exception)


# ---- a decomposed graph called with complex tensors where it takes real pairs -----------------


def exp_times(a, b):
    return torch.exp(a) * b


def test_decomposed_graph_names_a_complex_input_it_takes_as_pairs():
    a, b = randc(4), randc(4)
    gm = realify.decompose(exp_times, [a, b], inputs="interleaved", outputs="interleaved")
    with pytest.raises(realify.RealifyError) as info:
        gm(a, b)
    message = str(info.value)
    for word in ("input 0 (a)", "torch.complex64 tensor", "real-only", "torch.float32 tensor of shape (..., 2)",
                 "torch.view_as_real(a)", "RealCall(gm, gm.realify_signature)"):
        assert word in message, (word, message)
    with pytest.raises(realify.RealifyError, match=r"input 1 \(b\) is a torch.float32 tensor of shape \(4,\).*"
                                                   r"\(\.\.\., 2\).*torch.view_as_real\(b\)"):
        gm(torch.view_as_real(a), b.real)
    # both ways the message gives: the pairs, or the complex tensors through the boundary's runtime
    (out,) = gm(torch.view_as_real(a), torch.view_as_real(b))
    torch.testing.assert_close(torch.view_as_complex(out), exp_times(a, b))
    from realify.runtime.boundary import RealCall

    torch.testing.assert_close(RealCall(gm, gm.realify_signature)(a, b), exp_times(a, b))


def test_decomposed_graph_names_a_complex_input_it_takes_as_planes():
    a, b = randc(4), randc(4)
    gm = realify.decompose(exp_times, [a, b], inputs="planar", outputs="interleaved")
    with pytest.raises(realify.RealifyError, match=r"input 0 \(a\) is a torch.complex64 tensor.*shape \(2, \.\.\.\)"
                                                   r".*torch.stack\(\[a.real, a.imag\]\)"):
        gm(a, b)
    (out,) = gm(torch.stack([a.real, a.imag]), torch.stack([b.real, b.imag]))
    torch.testing.assert_close(torch.view_as_complex(out), exp_times(a, b))


def test_decomposed_graph_with_complex_layouts_takes_complex_tensors_unchecked():
    a, b = randc(4), randc(4)
    gm = realify.decompose(exp_times, [a, b])
    assert not gm._forward_pre_hooks  # nothing to check: complex inputs are the graph's own
    torch.testing.assert_close(gm(a, b)[0], exp_times(a, b))
    # the compile backend's graph, whose runtime makes the pairs itself, has no check either
    gm = realify.decompose(exp_times, [a, b], inputs="interleaved", outputs="interleaved", check_inputs=False)
    assert not gm._forward_pre_hooks


# ---- the eager-island warning: the op, the user's line, and the two ways forward ----------------


@pytest.mark.usefixtures("fresh_dynamo")
def test_island_warning_names_op_line_and_what_to_do(monkeypatch):
    monkeypatch.setattr(realify.engine.islands, "_WARNED", set())  # warned once per op per process
    z = randc(3, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        realify.compile(twist_of_double, inner="eager")(z)
    (message,) = [str(w.message) for w in caught if "eager island" in str(w.message)]
    assert PHASE_TWIST in message
    assert line_of(twist_of_double, "phase_twist(y)") in message
    assert "realify.rules.register" in message and "'Writing a rule'" in message
    assert "strict=True" in message and "realify.config.strict = True" in message


# ---- messages name documentation pages, not repository paths ---------------------------------


def _headings(page: str) -> list[str]:
    """A Markdown page's headings, outside its code blocks (where ``#`` starts a comment)."""
    headings, in_code = [], False
    for line in page.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif line.startswith("#") and not in_code:
            headings.append(line)
    return headings


def _docs_titles_and_sections() -> tuple[set[str], set[str]]:
    import pathlib

    docs = pathlib.Path(__file__).resolve().parents[1] / "docs"
    headings = [h for page in docs.glob("*.md") for h in _headings(page.read_text(encoding="utf-8"))]
    titles = {h[2:].strip() for h in headings if h.startswith("# ")}
    sections = {h.lstrip("#").strip() for h in headings if h.startswith("##")}
    return titles, sections


def test_advice_names_docs_pages_that_exist():
    import importlib

    from realify import errors

    export = importlib.import_module("realify.export")  # the module; realify.export is the function

    titles, sections = _docs_titles_and_sections()
    messages = [errors.COMPILE_ADVICE, errors.DECOMPOSE_ADVICE, export._EXPORT_ADVICE,
                realify.engine.islands.island_warning("op", "f.py:1 in f: op(z)"),
                str(export._constraint_violation("  - Ne(s0, 3)"))]
    for message in messages:
        assert "docs/" not in message and ".md" not in message, message
        pages = re.findall(r"docs page '([^']+)'", message)
        assert pages, message
        assert set(pages) <= titles, (pages, message)
        assert set(re.findall(r"the '([^']+)' section", message)) <= sections, message


def test_missing_rule_errors_name_the_rules_page():
    with pytest.raises(realify.MissingRuleError) as info:
        realify.decompose(twist_of_double, [randc(3, 3)])
    assert "'Writing a rule'" in str(info.value) and "docs/rules.md" not in str(info.value)
