"""The device-mix matrix: the dtype-mix matrix's ops (:mod:`realify.tools.dtype_mix`) with their
operands on two devices, an accelerator's and the CPU's, each call traced by eager's own fake
tensors (the device rules of every trace, without the accelerator) and through
``realify.export``, and the outcomes compared: outputs of eager's dtypes, shapes and devices, or
an exception of eager's type.

The accelerator is a fake one (``FakeTensorMode`` makes tensors of a device it does not hold):
fake tensors carry eager's device checks (every operand on one device, except 0-d CPU tensors,
which eager takes as scalars; ``copy_`` across devices), which are what a trace must keep.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._pytree import tree_leaves

from .dtype_mix import Case, Outcome, _of_tensors, outcome
from .symbolic_sizes import _Program as ModuleOf

ACCELERATOR = torch.device("cuda", 0)


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where a case's tensor operands are: each on the accelerator or on the CPU, and those
    made 0-d (a CPU scalar tensor beside accelerator operands)."""
    on_accelerator: tuple[bool, ...]
    zero_dim: tuple[bool, ...] = ()

    def __str__(self) -> str:
        where = ["0-d cpu" if z else ("cuda" if a else "cpu")
                 for a, z in zip(self.on_accelerator, self.zero_dim or (False,) * len(self.on_accelerator))]
        return "(" + ", ".join(where) + ")"


def placements(case: Case) -> Iterator[Placement]:
    """Every operand on the accelerator; each alone there; each a 0-d CPU tensor beside the
    others there."""
    n = sum(isinstance(x, torch.Tensor) for x in case.operands)
    yield Placement((True,) * n)
    for i in range(n if n > 1 else 0):
        yield Placement(tuple(j == i for j in range(n)))
        yield Placement(tuple(j != i for j in range(n)), tuple(j == i for j in range(n)))


def _zero_dim(t: torch.Tensor) -> torch.Tensor:
    """A 0-d tensor of ``t``'s first value (1 where ``t`` is empty), in its dtype."""
    return t.reshape(-1)[0].clone() if t.numel() else torch.ones((), dtype=t.dtype)


def _placed(tensors: list[torch.Tensor], placement: Placement, mode: FakeTensorMode) -> list[torch.Tensor]:
    zero_dim = placement.zero_dim or (False,) * len(tensors)
    placed = []
    for t, on_accelerator, scalar in zip(tensors, placement.on_accelerator, zero_dim):
        fake = mode.from_tensor(_zero_dim(t) if scalar else t)
        with mode:
            placed.append(fake.to(ACCELERATOR) if on_accelerator else fake)
    return placed


def _signature(value: Any) -> list:
    return [(v.dtype, tuple(v.shape), v.device) if isinstance(v, torch.Tensor) else v for v in tree_leaves(value)]


def _traced(case: Case, placement: Placement, front_end: Callable) -> Outcome:
    program, tensors = _of_tensors(case)
    mode = FakeTensorMode(allow_non_fake_inputs=True)  # a program's constants are real tensors
    fakes = _placed(tensors, placement, mode)
    return outcome(lambda: _signature(front_end(program, fakes, mode)))


def _eager(program: Callable, fakes: list[torch.Tensor], mode: FakeTensorMode) -> Any:
    with mode:
        return program(*fakes)


def _realify_export(program: Callable, fakes: list[torch.Tensor], mode: FakeTensorMode) -> Any:
    import realify
    exported = realify.export(ModuleOf(program), tuple(fakes))
    with mode:
        return realify.ComplexCallAdapter(exported)(*fakes)


def _plain_export(program: Callable, fakes: list[torch.Tensor], mode: FakeTensorMode) -> Any:
    exported = torch.export.export(ModuleOf(program), tuple(fakes))
    with mode:
        return exported.module()(*fakes)


def _on_cpu(case: Case, placement: Placement) -> Outcome:
    """Eager's outcome with real values, every operand on the CPU (0-d where placed so)."""
    program, tensors = _of_tensors(case)
    zero_dim = placement.zero_dim or (False,) * len(tensors)
    tensors = [_zero_dim(t) if z else t for t, z in zip(tensors, zero_dim)]
    return outcome(lambda: program(*tensors))


def check(case: Case, placement: Placement) -> tuple[str, str | None]:
    """("same", None) where ``realify.export`` does with ``case`` at ``placement`` what eager's
    fake tensors do; ("shared", what) where it does what plain ``torch.export`` does on the same
    fake tensors (a difference of torch's trace, not realify's); ("eager's refusal", what) where
    it raises the exception eager raises on the CPU with real values, which fake tensors do not
    check (a complex result written into a real view); else ("differs", what)."""
    expected = _traced(case, placement, _eager)
    actual = _traced(case, placement, _realify_export)
    difference = _difference(expected, actual)
    if difference is None:
        return "same", None
    what = f"{case} at {placement}: {difference}"
    if _difference(_traced(case, placement, _plain_export), actual) is None:
        return "shared", what
    on_cpu = _on_cpu(case, placement)
    if actual.error is not None and on_cpu.error is not None and isinstance(actual.error, type(on_cpu.error)):
        return "eager's refusal", what
    return "differs", what


def _difference(expected: Outcome, actual: Outcome) -> str | None:
    if expected.error is not None:
        if actual.error is None or not isinstance(actual.error, type(expected.error)):
            return f"eager {expected}, realify.export {_described(actual)}"
        return None
    if actual.error is not None or actual.value != expected.value:
        return f"eager {_described(expected)}, realify.export {_described(actual)}"
    return None


def _described(o: Outcome) -> str:
    return str(o) if o.error is not None else f"gives {o.value}"


