"""Table-driven: every OpInfo op that supports complex64 on CPU, each sample, complex64 and
complex128, through (a) the eager ComplexTensor and (b) decompose, against eager PyTorch; and
fewer samples through (c) the compile backend, Inductor and (d) realify.export.

Known failures (tests/known_failures.py) are strict xfails. A compile or Inductor run that
hands no graph to realify's backend (dynamo graph-breaks and runs the op itself) is skipped,
with the reason known_failures.NO_GRAPH gives; an op listed there whose every sample hands a
graph fails, and so does an op that hands no graph and is not listed."""

from __future__ import annotations

import os

import pytest
from known_failures import COMPILE, DECOMPOSE, EAGER, EXPORT, INDUCTOR, NO_GRAPH

from realify.tools.opinfo import (
    DTYPES,
    GEMM_OPS,
    MAX_SAMPLES,
    NONDETERMINISTIC,
    NoGraphCaptured,
    assert_matches,
    call_sample,
    complex_ops,
    op_id,
    run_compile,
    run_decompose,
    run_eager_complex_tensor,
    run_export,
    run_inductor,
    samples,
)

# front end -> (runner, known failures, dtypes, extra marks, samples per op, ops dynamo hands no graph)
FRONT_ENDS = {
    "eager": (run_eager_complex_tensor, EAGER, DTYPES, [], MAX_SAMPLES, {}),
    "decompose": (run_decompose, DECOMPOSE, DTYPES, [], MAX_SAMPLES, {}),
    # the backend adds dynamo capture on top of decompose (which already runs every sample in
    # both dtypes): complex64 and two samples keep CI time reasonable
    "compile": (run_compile, COMPILE, DTYPES[:1], [], 2, NO_GRAPH),
    # Inductor compiles each sample for seconds: the first sample of each op
    "inductor": (run_inductor, INDUCTOR, DTYPES[:1], [pytest.mark.slow], 1, NO_GRAPH),
    # export adds two torch.export traces around decompose: the first complex64 sample
    "export": (run_export, EXPORT, DTYPES[:1], [], 1, {}),
}


# The compatibility run on older torch releases (make test-compat, tests/conftest.py) checks
# the first sample of each op, complex64 only, each op in every second front end (the offset
# alternates between front ends, so each op runs in two of them and each front end on half the
# ops): the rules are the same, what differs between releases is tracing
SAMPLES_CAP = 1 if os.environ.get("REALIFY_COMPAT_RUN") else None


def _params():
    for offset, (front_end, (_, known, dtypes, marks, _, _)) in enumerate(FRONT_ENDS.items()):
        for index, op in enumerate(complex_ops()):
            if SAMPLES_CAP and (index + offset) % 2:
                continue
            name = op_id(op)
            op_marks = list(marks)
            if name in known:
                op_marks.append(pytest.mark.xfail(reason=known[name], strict=True))
            for dtype in dtypes[:1] if SAMPLES_CAP else dtypes:
                yield pytest.param(front_end, op, dtype, id=f"{front_end}-{name}-{str(dtype)[6:]}", marks=op_marks)


@pytest.mark.parametrize("front_end,op,dtype", list(_params()))
def test_op(front_end, op, dtype):
    run, _, _, _, max_samples, no_graph = FRONT_ENDS[front_end]
    name = op_id(op)
    cases = samples(op, dtype)[:min(max_samples, SAMPLES_CAP or max_samples)]
    if not cases:
        pytest.skip(f"OpInfo gives no {dtype} samples for {name} on CPU")
    checked, graphless = 0, []
    for i, sample in enumerate(cases):
        try:
            expected = call_sample(op, sample)
        except Exception:
            continue  # eager itself rejects this sample: nothing to compare with
        try:
            actual = run(op, sample)
        except NoGraphCaptured:
            graphless.append(i)  # the samples that do hand a graph are still checked
            continue
        assert_matches(actual, expected, metadata_only=name in NONDETERMINISTIC, dtype=dtype, gemm=name in GEMM_OPS)
        checked += 1
    if graphless and name not in no_graph:
        pytest.fail(f"dynamo compiled no graph for {name} (sample(s) {graphless}): nothing reached realify's "
                    f"backend; find why and record it in tests/known_failures.py NO_GRAPH")
    if graphless:
        why = no_graph[name]
        partly = f"; on sample(s) {graphless} of {len(cases)}, the {checked} other(s) passed" if checked else ""
        pytest.skip(f"dynamo compiled no graph for {name}: nothing reached realify's backend ({why}){partly}")
    if name in no_graph and checked:
        pytest.fail(f"tests/known_failures.py NO_GRAPH lists {name}, but every sample this front end ran handed "
                    f"realify's backend a graph: remove it there")
    if checked == 0:
        pytest.skip(f"eager PyTorch rejects every {dtype} sample of {name}")
