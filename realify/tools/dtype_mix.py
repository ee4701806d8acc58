"""The dtype-mix matrix: ops with several operands called on operands of every dtype eager
meets (real, complex, integer, boolean tensors, Python complex numbers, 0-d tensors), each call
run in eager PyTorch and through a realify front end, and the outcomes compared: a value of
eager's dtype, shape and values, or an exception of eager's type.

A case is an op with complex64 operands (an OpInfo entry's first sample, or one of
:data:`CONSTRUCTS`) with one operand changed to another :data:`KINDS` entry.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils._pytree import tree_leaves

from .opinfo import GEMM_OPS, assert_matches, complex_ops, op_db, op_id, sample_program, samples
from .symbolic_sizes import _Program as ModuleOf
from .symbolic_sizes import growth, resized

# what an operand may be: a tensor dtype, a Python complex number or a 0-d complex64 tensor
KINDS = ("float32", "float64", "complex32", "complex64", "complex128", "int64", "bool", "python complex",
         "0-d complex64")


def recast(t: torch.Tensor, kind: str) -> Any:
    """The operand ``t`` (a complex64 tensor) as ``kind``, from its own values."""
    if kind == "python complex":
        return complex(t.reshape(-1)[0]) if t.numel() else 1 + 1j
    if kind == "0-d complex64":
        return t.reshape(-1)[0].clone() if t.numel() else torch.tensor(1 + 1j)
    dtype = getattr(torch, kind)
    if dtype is torch.bool:
        return t.real > 0
    if dtype is torch.int64:
        return (t.real * 3).round().to(dtype)
    return t.to(dtype) if dtype.is_complex else t.real.to(dtype)


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    program: Callable
    operands: tuple

    def __str__(self) -> str:
        return f"{self.name}({', '.join(_describe(x) for x in self.operands)})"


def _describe(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        return f"{str(x.dtype).removeprefix('torch.')}{list(x.shape)}"
    return repr(x)


def _z(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(shape, dtype=torch.complex64, generator=torch.Generator().manual_seed(seed))


def _index_put(x, v):
    return x.clone().index_put_((torch.tensor([0, 2]),), v)


def _augmented_add(a, b):
    a = a.clone()
    a += b
    return a


# the products, and the constructs that write one tensor's values into another
CONSTRUCTS: dict[str, tuple[Callable, tuple]] = {
    "mm": (torch.mm, ((3, 4), (4, 5))),
    "mv": (torch.mv, ((3, 4), (4,))),
    "bmm": (torch.bmm, ((2, 3, 4), (2, 4, 5))),
    "matmul": (torch.matmul, ((2, 3, 4), (4, 5))),
    "linear": (torch.nn.functional.linear, ((2, 3, 4), (5, 4))),
    "linear-bias": (torch.nn.functional.linear, ((2, 3, 4), (5, 4), (5,))),
    "addmm": (torch.addmm, ((3, 5), (3, 4), (4, 5))),
    "baddbmm": (torch.baddbmm, ((2, 3, 5), (2, 3, 4), (2, 4, 5))),
    "einsum": (lambda a, b: torch.einsum("ij,jk->ik", a, b), ((3, 4), (4, 5))),
    "index_put_": (_index_put, ((4, 3), (2, 3))),
    "copy_": (lambda x, y: x.clone().copy_(y), ((3, 4), (3, 4))),
    "where": (lambda a, b: torch.where(a.real.gt(0) if a.is_complex() else a.gt(0), a, b), ((3, 4), (3, 4))),
    "cat": (lambda a, b: torch.cat([a, b]), ((3, 4), (2, 4))),
    # a 0-d value written everywhere, or where a mask holds (a complex value into a real tensor:
    # fill_ takes the real part, as a cast does; masked_fill refuses it)
    "fill_": (lambda x, v: x.clone().fill_(v), ((3, 4), ())),
    "masked_fill": (lambda x, v: x.masked_fill(x.real.gt(0) if x.is_complex() else x.gt(0), v), ((3, 4), ())),
    "add_": (lambda a, b: a.clone().add_(b), ((3, 4), (3, 4))),
    "sub_": (lambda a, b: a.clone().sub_(b), ((3, 4), (3, 4))),
    "mul_": (lambda a, b: a.clone().mul_(b), ((3, 4), (3, 4))),
    "div_": (lambda a, b: a.clone().div_(b), ((3, 4), (3, 4))),
    "addcmul_": (lambda a, b: a.clone().addcmul_(b, b), ((3, 4), (3, 4))),
    "+=": (_augmented_add, ((3, 4), (3, 4))),
    # into a real view of a complex tensor: eager refuses a complex result there too
    "real.mul_": (lambda a, b: a.clone().real.mul_(b), ((3, 4), (3, 4))),
    "imag.add_": (lambda a, b: a.clone().imag.add_(b) if a.is_complex() else a.clone().add_(b), ((3, 4), (3, 4))),
}
# the in-place arithmetic among them: realify refuses a complex result written into a real
# tensor as eager does, where torch.compile's default backend computes the real part
IN_PLACE_ARITHMETIC = ("add_", "sub_", "mul_", "div_", "addcmul_", "+=", "real.mul_", "imag.add_")


def construct_cases() -> Iterator[Case]:
    for name in CONSTRUCTS:
        yield from construct_cases_of(name)


def construct_cases_of(name: str, kinds: tuple[str, ...] = KINDS) -> Iterator[Case]:
    case = construct_case(name)
    yield from _mixes(name, case.program, case.operands, kinds)


def construct_case(name: str) -> Case:
    """The construct called on complex64 operands."""
    program, shapes = CONSTRUCTS[name]
    return Case(name, program, tuple(_z(*shape, seed=i) for i, shape in enumerate(shapes)))


@functools.cache
def opinfo_entries() -> list:
    """The complex OpInfo entries whose first complex64 sample has two or more tensor operands."""
    found = []
    for op in complex_ops():
        cases = samples(op, torch.complex64)
        if cases:
            tensors, _ = sample_program(op, cases[0])
            if len([t for t in tensors if t.is_complex()]) >= 2 and all(t.layout == torch.strided for t in tensors):
                found.append(op)
    return found


def opinfo_cases(op, kinds: tuple[str, ...] = KINDS) -> Iterator[Case]:
    case = opinfo_case(op)
    yield from _mixes(case.name, case.program, case.operands, kinds)


def opinfo_case(op) -> Case:
    """The entry's first complex64 sample."""
    tensors, program = sample_program(op, samples(op, torch.complex64)[0])
    return Case(op_id(op), program, tuple(t.detach() for t in tensors))


def _complex(x: Any) -> Any:
    if isinstance(x, torch.Tensor) and x.is_floating_point():
        return x.to(torch.complex128 if x.dtype == torch.float64 else torch.complex64)
    return x


@functools.cache
def real_only_entries() -> list:
    """The OpInfo entries that take float32 on CPU and not complex64 (``mse_loss``, ``floor``,
    ``arange``'s factory): each called on complex operands is a call eager's own kernel may
    refuse, which the meta kernel (every trace) lets through."""
    return [op for op in op_db if torch.float32 in op.supported_dtypes("cpu")
            and torch.complex64 not in op.supported_dtypes("cpu")]


def real_only_cases(op) -> list[Case]:
    """The entry's first float32 sample with its floating tensors made complex (and a float32
    ``dtype`` argument, a factory's, complex64): eager's outcome on it, a refusal, or a value
    where OpInfo's dtype list is narrower than eager's kernels, is the one to match."""
    for sample in samples(op, torch.float32)[:1]:
        sample = sample.transform(_complex)  # a new sample: its kwargs are its own
        sample.kwargs = {k: torch.complex64 if v is torch.float32 else v for k, v in sample.kwargs.items()}
        tensors, program = sample_program(op, sample)
        if any(t.is_complex() for t in tensors) or torch.complex64 in sample.kwargs.values():
            return [Case(op_id(op), program, tuple(tensors))]
    return []


@functools.cache
def error_entries() -> list:
    """The complex OpInfo entries with error inputs (``error_inputs_func``)."""
    return [op for op in complex_ops() if op.error_inputs_func is not None]


def error_cases(op) -> list[Case]:
    """The entry's error inputs with their floating tensors made complex, where one is and eager
    still raises on it (the call each front end must refuse as eager does)."""
    try:
        inputs = list(op.error_inputs(torch.device("cpu")))
    except Exception:  # an entry whose error inputs need another device or dtype
        return []
    cases = []
    for error_input in inputs:
        sample = error_input.sample_input.transform(_complex)
        tensors, program = sample_program(op, sample)
        if not any(t.is_complex() for t in tensors):
            continue
        if outcome(functools.partial(program, *tensors)).error is not None:
            cases.append(Case(op_id(op), program, tuple(tensors)))
    return cases


def _mixes(name: str, program: Callable, operands: tuple, kinds: tuple[str, ...]) -> Iterator[Case]:
    """Each complex operand in turn as every other kind of ``kinds``."""
    for i, operand in enumerate(operands):
        if not (isinstance(operand, torch.Tensor) and operand.is_complex()):
            continue
        for kind in kinds:
            if kind != "complex64":
                yield Case(name, program, (*operands[:i], recast(operand, kind), *operands[i + 1:]))


@dataclasses.dataclass
class Outcome:
    value: Any = None
    error: BaseException | None = None

    def __str__(self) -> str:
        if self.error is not None:
            return f"raises {type(self.error).__name__}: {str(self.error).splitlines()[0][:160]}"
        return "value " + ", ".join(_describe(v) for v in tree_leaves(self.value) if isinstance(v, torch.Tensor))


def outcome(run: Callable[[], Any]) -> Outcome:
    # every run from one generator state: a random op's values are comparable
    torch.manual_seed(0)
    try:
        return Outcome(value=run())
    except Exception as err:  # every exception is an outcome to compare
        return Outcome(error=_unwrapped(err))


def _unwrapped(err: BaseException) -> BaseException:
    seen = set()
    while isinstance(err, torch._dynamo.exc.BackendCompilerFailed) and id(err) not in seen:
        seen.add(id(err))
        err = err.inner_exception
    return err


def _eager_front_end(case: Case) -> Any:
    from ..runtime.complex_tensor import unwrap_complex, wrap_complex
    return unwrap_complex(case.program(*wrap_complex(case.operands)))


def _compile_front_end(case: Case) -> Any:
    import realify
    torch._dynamo.reset()
    try:
        backend = functools.partial(realify.realify_backend, inner="eager")
        return torch.compile(case.program, backend=backend, dynamic=False)(*case.operands)
    finally:
        torch._dynamo.reset()


def _of_tensors(case: Case) -> tuple[Callable, list[torch.Tensor]]:
    """The case as a program of its tensor operands (a Python number: a constant of it)."""
    tensors = [x for x in case.operands if isinstance(x, torch.Tensor)]
    positions = [i for i, x in enumerate(case.operands) if isinstance(x, torch.Tensor)]

    def program(*ts):
        operands = list(case.operands)
        for i, t in zip(positions, ts):
            operands[i] = t
        return case.program(*operands)

    return program, tensors


def _export_front_end(case: Case) -> Any:
    import realify
    program, tensors = _of_tensors(case)
    ep = realify.export(ModuleOf(program), tuple(tensors))
    return realify.ComplexCallAdapter(ep)(*tensors)


def _plain_export(case: Case) -> Any:
    program, tensors = _of_tensors(case)
    return torch.export.export(ModuleOf(program), tuple(tensors)).module()(*tensors)


FRONT_ENDS: dict[str, Callable[[Case], Any]] = {
    "eager": _eager_front_end, "compile": _compile_front_end, "export": _export_front_end}


def _default_backend(case: Case) -> Any:
    torch._dynamo.reset()
    try:
        return torch.compile(case.program, backend="aot_eager", dynamic=False)(*case.operands)
    finally:
        torch._dynamo.reset()


# what each traced front end is compared with where it differs from eager: torch's own front end
# on the same complex program (torch.compile's default backend, plain torch.export)
BASELINES: dict[str, Callable[[Case], Any]] = {"compile": _default_backend, "export": _plain_export}


def check(case: Case, front_end: str) -> tuple[str, str | None]:
    """("same", None) where ``front_end`` does what eager does with ``case``; where it differs
    as torch's own front end (:data:`BASELINES`) differs, a limitation of torch's tracing
    shared by realify, ("shared refusal", what) where eager and both front ends raise (another
    exception type than eager's: dynamo's fake-tensor checks run before any backend) and
    ("shared", what) where they compute a value eager refuses; else ("differs", what)."""
    expected = outcome(lambda: case.program(*case.operands))
    actual = outcome(lambda: FRONT_ENDS[front_end](case))
    difference = _difference(case, expected, actual)
    if difference is None:
        return "same", None
    baseline = BASELINES.get(front_end)
    if baseline is not None and _difference(case, outcome(lambda: baseline(case)), actual) is None:
        refused = expected.error is not None and actual.error is not None
        return ("shared refusal" if refused else "shared"), difference
    return "differs", f"{difference} (realify's {front_end} front end)"


def _difference(case: Case, expected: Outcome, actual: Outcome) -> str | None:
    if expected.error is not None:
        if actual.error is None:
            return f"{case}: eager {expected}, realify gives a {actual}"
        if not isinstance(actual.error, type(expected.error)):
            return f"{case}: eager {expected}, realify {actual}"
        return None
    if actual.error is not None:
        return f"{case}: eager gives a {expected}, realify {actual}"
    try:
        assert_matches(actual.value, expected.value, gemm=case.name in GEMM_OPS or case.name in CONSTRUCTS,
                       dtype=torch.complex128 if any(
                           isinstance(x, torch.Tensor) and x.dtype == torch.complex128 for x in case.operands)
                       else torch.complex64)
    except AssertionError as err:
        return f"{case}: eager gives a {expected}; realify: {str(err).splitlines()[0]}"
    return None


def grown(case: Case, step: int) -> Case:
    """``case`` with every size of its tensor operands of at least 2 grown by ``step`` (equal
    sizes stay equal; operands of every dtype keep it; values drawn afresh)."""
    tensors = [x for x in case.operands if isinstance(x, torch.Tensor)]
    new = iter(resized(tensors, growth(tensors, step), seed=step))
    return Case(case.name, case.program, tuple(next(new) if isinstance(x, torch.Tensor) else x
                                               for x in case.operands))


def check_at_shapes(case: Case, steps: tuple[int, ...] = (0, 1, 3)) -> list[tuple[str, str]]:
    """The compile backend with default settings called on ``case`` grown by each of ``steps``
    in a row: dynamo recompiles the second call with symbolic sizes (automatic dynamic shapes)
    and reuses that graph for the third, where eager's contract must hold as at the first.
    Returns ``(kind, what)`` for each call whose outcome is not eager's: "shared" where
    torch.compile's default backend, called the same way, does the same, else "differs"."""
    import realify
    calls = [grown(case, step) for step in steps]
    differences = []
    torch._dynamo.reset()
    try:
        compiled = torch.compile(case.program, backend=functools.partial(realify.realify_backend, inner="eager"))
        actual = [outcome(lambda c=c: compiled(*c.operands)) for c in calls]
        torch._dynamo.reset()
        baseline = torch.compile(case.program, backend="aot_eager")
        default = [outcome(lambda c=c: baseline(*c.operands)) for c in calls]
    finally:
        torch._dynamo.reset()
    for step, c, got, theirs in zip(steps, calls, actual, default):
        difference = _difference(c, outcome(lambda c=c: c.program(*c.operands)), got)
        if difference is not None:
            kind = "shared" if _difference(c, theirs, got) is None else "differs"
            differences.append((kind, f"{difference} (grown by {step})"))
    return differences


def distributed(case: Case, mesh: Any, placement: Any) -> Case:
    """``case`` on DTensors: each tensor operand distributed over ``mesh`` with ``placement``
    (0-d ones replicated), each result gathered to a plain tensor, so that values compare as
    the plain case's do. A ``Partial`` placement wraps the local tensor as it is
    (``DTensor.from_local``): on a one-rank mesh, the same values."""
    from torch.distributed.tensor import DTensor, Partial, Replicate, distribute_tensor

    def to_dtensor(x: Any) -> Any:
        if not isinstance(x, torch.Tensor):
            return x
        chosen = placement if x.dim() else Replicate()
        if isinstance(chosen, Partial):
            return DTensor.from_local(x, mesh, [chosen], run_check=False)
        return distribute_tensor(x, mesh, [chosen])

    def program(*operands: Any) -> Any:
        result = case.program(*operands)
        return [r.full_tensor() if isinstance(r, DTensor) else r for r in tree_leaves(result)]

    return Case(case.name, program, tuple(to_dtensor(x) for x in case.operands))
