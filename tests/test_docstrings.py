"""The API reference answers: every name docs/api.md renders has a numpy-style docstring whose
sections match the object (each parameter of the signature documented, and only those; a
Returns section unless it returns None; Raises; Examples), and the Examples run.

ruff's pydocstyle rules (numpy convention, ``make lint``) check the docstrings' form; this file
checks their content against the code, which a linter cannot, and runs every example as a
doctest. A name realify exports (``realify.__all__``) that the reference leaves out fails too.
"""

from __future__ import annotations

import dataclasses
import doctest
import importlib
import inspect
import re
import types
from pathlib import Path

import pytest
import torch

import realify

API_PAGE = Path(__file__).resolve().parents[1] / "docs" / "api.md"
DOCTEST_FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def reference_names() -> list[str]:
    """The dotted names docs/api.md renders, in page order: each ``::: name`` line and, unless its
    options say ``members: false``, the public functions and methods it renders with it."""
    names = []
    for dotted, options in re.findall(r"^::: (\S+)\n((?:[ \t]+\S.*\n)*)", API_PAGE.read_text(), re.MULTILINE):
        names.append(dotted)
        if "members: false" not in options:
            names += [f"{dotted}.{member}" for member in public_members(resolve(dotted))]
    return names


def public_members(obj) -> list[str]:
    """The functions a module defines, or the methods a class defines itself, without a leading underscore."""
    if isinstance(obj, types.ModuleType):
        return [name for name, value in vars(obj).items() if not name.startswith("_")
                and isinstance(value, types.FunctionType) and value.__module__ == obj.__name__]
    if isinstance(obj, type) and not is_exception(obj):
        return [name for name, value in vars(obj).items() if not name.startswith("_")
                and isinstance(value, (types.FunctionType, staticmethod, classmethod, property))]
    return []


def resolve(dotted: str):
    """The object a dotted name renders: the longest importable module prefix, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            obj = getattr(obj, attribute)
        return obj
    raise ImportError(dotted)


def sections(doc: str) -> dict[str, str]:
    """numpy docstring sections: a title line underlined with dashes -> the text below it."""
    found: dict[str, str] = {}
    title, lines = None, []
    doc_lines = doc.splitlines()
    for i, line in enumerate(doc_lines):
        underline = doc_lines[i + 1].strip() if i + 1 < len(doc_lines) else ""
        if line.strip() and underline and set(underline) == {"-"} and len(underline) >= len(line.strip()) - 1:
            if title:
                found[title] = "\n".join(lines)
            title, lines = line.strip(), []
        elif title and not (line.strip() and set(line.strip()) == {"-"}):
            lines.append(line)
    if title:
        found[title] = "\n".join(lines)
    return found


def documented_names(section: str) -> list[str]:
    """The names a Parameters/Attributes section lists: unindented ``name : type`` (or ``name``) lines."""
    names = []
    for line in section.splitlines():
        if line.strip() and not line.startswith((" ", "\t")):
            for name in line.split(":")[0].split(","):
                names.append(name.strip().lstrip("*"))
    return names


def signature_parameters(function) -> list[str]:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return []
    return [name for name in signature.parameters if name not in ("self", "cls")]


def returns_none(function) -> bool:
    try:
        annotation = inspect.signature(function).return_annotation
    except (TypeError, ValueError):
        return False
    return annotation in (None, "None", type(None))


def is_function(obj) -> bool:
    routines = (types.FunctionType, types.MethodType, types.BuiltinFunctionType)
    return isinstance(obj, routines) or hasattr(obj, "cache_info")


def is_exception(obj) -> bool:
    return isinstance(obj, type) and issubclass(obj, BaseException)


def own_constructor(cls):
    """The constructor a class's Parameters section documents: the nearest __new__ or __init__ (a
    dataclass's included) that names its parameters, rather than passing on ``*args, **kwargs``."""
    for klass in cls.__mro__:
        if klass in (object, torch.Tensor, torch._C.TensorBase, BaseException, Exception):
            return None
        for method in ("__new__", "__init__"):
            function = vars(klass).get(method)
            if isinstance(function, staticmethod):
                function = function.__func__
            if isinstance(function, types.FunctionType) and not passes_on(function):
                return function
    return None


def passes_on(function) -> bool:
    kinds = {parameter.kind for name, parameter in inspect.signature(function).parameters.items()
             if name not in ("self", "cls")}
    return kinds == {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD}


def problems(dotted: str) -> list[str]:
    """What the docstring of ``dotted`` lacks, checked against the object itself."""
    obj = resolve(dotted)
    doc = inspect.getdoc(obj) or ""
    if isinstance(obj, property) and doc.strip():
        return []
    if not doc.strip():
        return ["no docstring"]
    found = sections(doc)
    wrong = [f"no {title} section" for title in ("Examples",) if title not in found]
    if isinstance(obj, types.ModuleType) or is_exception(obj):
        return wrong
    if is_function(obj):
        expected = signature_parameters(inspect.unwrap(obj))
        required = ["Raises"] + (["Parameters"] if expected else [])
        wrong += [f"no {title} section" for title in required if title not in found]
        if not returns_none(obj) and "Returns" not in found and "Yields" not in found:
            wrong.append("no Returns (or Yields) section")
    elif dataclasses.is_dataclass(obj):
        # a dataclass's constructor takes its fields: an Attributes section documents both
        fields = [field.name for field in dataclasses.fields(obj) if not field.name.startswith("_")]
        listed = documented_names(found.get("Attributes", "")) + documented_names(found.get("Parameters", ""))
        return wrong + [f"field {name!r} is not in Attributes or Parameters" for name in fields if name not in listed]
    else:
        constructor = own_constructor(obj)
        expected = signature_parameters(constructor) if constructor else []
        if expected and "Parameters" not in found:
            wrong.append("no Parameters section")
    listed = documented_names(found.get("Parameters", ""))
    wrong += [f"parameter {name!r} is not documented" for name in expected if name not in listed]
    wrong += [f"Parameters lists {name!r}, which the signature lacks" for name in listed if name not in expected]
    return wrong


NAMES = reference_names()


@pytest.mark.parametrize("dotted", NAMES)
def test_docstring_documents_the_object(dotted):
    assert problems(dotted) == [], f"{dotted}'s docstring: {'; '.join(problems(dotted))}"


@pytest.mark.parametrize("dotted", [dotted for dotted in NAMES if not isinstance(resolve(dotted), property)])
def test_docstring_examples_run(dotted):
    obj = resolve(dotted)
    tests = [test for test in doctest.DocTestFinder(recurse=False).find(obj, dotted, globs={})
             if test.examples]
    assert tests, f"{dotted} has no runnable example (a '>>> ' line in its Examples section)"
    runner = doctest.DocTestRunner(optionflags=DOCTEST_FLAGS)
    with realify.config.patch(**realify.config.snapshot()):
        for test in tests:
            runner.run(test)
    assert runner.failures == 0, f"{dotted}: {runner.failures} of its examples gave other output (see above)"


def test_every_exported_name_is_in_the_reference():
    rendered = {dotted.removeprefix("realify.") for dotted in NAMES}
    rendered |= {dotted.split(".")[1] for dotted in NAMES if dotted.count(".") >= 2}
    assert [name for name in realify.__all__ if name not in rendered] == []


# pages that record history (past runs, past releases), not the API as it is
HISTORY_PAGES = ("benchmarks-history.md", "changelog.md")


def test_every_name_the_docs_use_is_in_the_reference():
    """A dotted ``realify.`` name in backticks on a page of the site or the README is a name the
    reference renders, an attribute of one (``realify.config.strict``), or a package whose names
    it renders (``realify.onnx``)."""
    root = API_PAGE.parents[1]
    pages = [root / "README.md", *(p for p in sorted((root / "docs").glob("*.md")) if p.name not in HISTORY_PAGES)]
    # the functions realify.export and realify.explain render under their own names (an anchor)
    rendered = set(NAMES) | set(re.findall(r"\[\]\(\)\{#(realify[\w.]*)\}", API_PAGE.read_text()))
    missing = set()
    for page in pages:
        for dotted in re.findall(r"`(realify(?:\.[A-Za-z_]\w*)+)", page.read_text()):
            # the name, an attribute of it, or a package whose names it renders (realify.onnx)
            if dotted.split(".")[-1].startswith("__") or any(
                    dotted == name or dotted.startswith(name + ".") or name.startswith(dotted + ".")
                    for name in rendered):
                continue
            missing.add(f"{dotted} ({page.name})")
    assert sorted(missing) == []
