"""A pytest plugin that counts test outcomes per front end, for README's compatibility table.

A test counts toward every front end it ran: ``compile`` when the torch.compile backend
compiled a graph, ``export`` when ``realify.export`` ran, ``onnx`` when ``realify.onnx.to_onnx``
ran, ``eager`` when an op dispatched through the eager ``ComplexTensor`` outside realify's own
tracing. Enabled by ``REALIFY_FRONT_END_REPORT=<file.json>``; ``.ci/compat_table.py`` turns the
reports of several torch versions into the table.
"""

from __future__ import annotations

import collections
import functools
import json
import os
import threading

import pytest

FRONT_ENDS = ("compile", "export", "onnx", "eager")
_seen: set[str] = set()
_inside = threading.local()  # depth of realify's own tracing (decompose, export)


def _counting(front_end: str | None, fn, *, tracing: bool = False):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if front_end:
            _seen.add(front_end)
        _inside.depth = getattr(_inside, "depth", 0) + tracing
        try:
            return fn(*args, **kwargs)
        finally:
            _inside.depth -= tracing
    return wrapper


def _instrument() -> None:
    import importlib
    import sys

    import realify
    from realify.tensor import ComplexTensor

    # the package's attributes export/decompose are the functions; the modules are in sys.modules
    backend, export, decompose = (sys.modules[f"realify.{m}"] for m in ("backend", "export", "engine.decompose"))
    onnx = importlib.import_module("realify.onnx")
    backend.realify_backend = realify.realify_backend = _counting("compile", backend.realify_backend, tracing=True)
    decompose.decompose = realify.decompose = _counting("compile", decompose.decompose, tracing=True)
    export.export = realify.export = _counting("export", export.export, tracing=True)
    onnx.to_onnx = _counting("onnx", onnx.to_onnx)
    dispatch = ComplexTensor.__dict__["__torch_dispatch__"].__func__

    def eager_dispatch(cls, *args, **kwargs):
        if not getattr(_inside, "depth", 0):
            _seen.add("eager")
        return dispatch(cls, *args, **kwargs)

    ComplexTensor.__torch_dispatch__ = classmethod(eager_dispatch)


# outcomes per front end, counted where a report is asked for
_counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)


def pytest_configure(config):
    if os.environ.get("REALIFY_FRONT_END_REPORT"):
        _instrument()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "setup":
        _seen.clear()
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        report.user_properties.append(("front_ends", sorted(_seen)))


def pytest_runtest_logreport(report):
    fronts = dict(report.user_properties).get("front_ends")
    counted = report.when == "call" or (report.when == "setup" and report.outcome != "passed")
    if not os.environ.get("REALIFY_FRONT_END_REPORT") or fronts is None or not counted:
        return
    outcome = "xfailed" if hasattr(report, "wasxfail") else report.outcome
    for front_end in fronts:
        _counts[front_end][outcome] += 1


def pytest_sessionfinish(session):
    path = os.environ.get("REALIFY_FRONT_END_REPORT")
    if not path or hasattr(session.config, "workerinput"):  # xdist workers: the controller writes
        return
    import torch

    suite = "compatibility subset" if os.environ.get("REALIFY_COMPAT_RUN") else "full"
    report = {"torch": torch.__version__, "suite": suite, "exitstatus": int(session.exitstatus),
              "front_ends": {f: dict(_counts.get(f, {})) for f in FRONT_ENDS}}
    with open(path, "w") as f:
        json.dump(report, f, indent=1, sort_keys=True)
