"""Table-driven: every OpInfo op that supports complex64 on CPU, each sample, complex64 and
complex128, through (a) the eager ComplexTensor and (b) decompose, against eager PyTorch; and
fewer samples through (c) the compile backend, Inductor and (d) realify.export."""

from __future__ import annotations

import os

import pytest
import torch

from known_failures import COMPILE, DECOMPOSE, EAGER, EXPORT, FIRST_SAMPLE_PASSES, INDUCTOR
from realify.opinfo import (DTYPES, GEMM_OPS, MAX_SAMPLES, NONDETERMINISTIC, assert_matches, call_sample, complex_ops, op_id,
                            run_compile, run_decompose, run_eager_complex_tensor, run_export, run_inductor, samples)

# front end -> (runner, known failures, dtypes, extra marks, samples per op)
FRONT_ENDS = {
    "eager": (run_eager_complex_tensor, EAGER, DTYPES, [], MAX_SAMPLES),
    "decompose": (run_decompose, DECOMPOSE, DTYPES, [], MAX_SAMPLES),
    # the backend adds dynamo capture on top of decompose (which already runs every sample in
    # both dtypes): complex64 and two samples keep CI time reasonable
    "compile": (run_compile, COMPILE, DTYPES[:1], [], 2),
    # Inductor compiles each sample for seconds: the first sample of each op
    "inductor": (run_inductor, INDUCTOR, DTYPES[:1], [pytest.mark.slow], 1),
    # export adds two torch.export traces around decompose: the first complex64 sample
    "export": (run_export, EXPORT, DTYPES[:1], [], 1),
}


# The compatibility run on older torch releases (make test-compat, tests/conftest.py) checks
# the first sample of each op, complex64 only: the rules are the same, what differs between
# releases is tracing
SAMPLES_CAP = 1 if os.environ.get("REALIFY_COMPAT_RUN") else None


def _params():
    for front_end, (_, known, dtypes, marks, _) in FRONT_ENDS.items():
        for op in complex_ops():
            name = op_id(op)
            op_marks = list(marks)
            if name in known and not (SAMPLES_CAP and name in FIRST_SAMPLE_PASSES):
                op_marks.append(pytest.mark.xfail(reason=known[name], strict=True))
            for dtype in dtypes[:1] if SAMPLES_CAP else dtypes:
                yield pytest.param(front_end, op, dtype, id=f"{front_end}-{name}-{str(dtype)[6:]}", marks=op_marks)


@pytest.mark.parametrize("front_end,op,dtype", list(_params()))
def test_op(front_end, op, dtype):
    run, *_, max_samples = FRONT_ENDS[front_end]
    cases = samples(op, dtype)[:min(max_samples, SAMPLES_CAP or max_samples)]
    if not cases:
        pytest.skip(f"OpInfo gives no {dtype} samples for {op_id(op)} on CPU")
    checked = 0
    for sample in cases:
        try:
            expected = call_sample(op, sample)
        except Exception:
            continue  # eager itself rejects this sample: nothing to compare with
        actual = run(op, sample)
        assert_matches(actual, expected, metadata_only=op_id(op) in NONDETERMINISTIC, dtype=dtype,
                       gemm=op_id(op) in GEMM_OPS)
        checked += 1
    if checked == 0:
        pytest.skip(f"eager PyTorch rejects every {dtype} sample of {op_id(op)}")
