"""ONNX export of real-only programs made by :func:`realify.export`.

The exported graph is real everywhere, so ``torch.onnx.export`` translates it with its own
tables, except for realify's FFT ops (:mod:`realify.runtime.ops`) on (re, im) pairs. Their translations use
ONNX ``DFT`` (opset 20: ``axis`` is an input), which works on a trailing dim of 2
``[re, im]`` (or 1 for a real signal), the same interleaved layout the export boundary uses.

Normalization follows aten's codes: 0 none, 1 by ``1/sqrt(n)``, 2 by ``1/n``, whatever the
direction, with ``n`` the product of the transformed signal lengths. ONNX's inverse DFT
already divides by each axis length, so inverse transforms are rescaled by ``n * scale``.

The modules, by concern:

- ``exporter``: :func:`to_onnx`, the entry, and the onnxscript optimizer's pass on its model;
- ``translation_table``: :func:`onnx_translation_table`, the ``custom_translation_table`` entries;
- ``fft``, ``pointwise``, ``overlap_add``, ``cholesky``: those translations (onnxscript,
  traced at export time), with ``graph_helpers``, the constants they share;
- ``linalg``: the real-arithmetic forms of the LAPACK calls, applied before translation;
- ``refusals``: the ops realify.onnx does not write, and the checks that name them
  (:class:`~realify.errors.NoOnnxFormError`);
- ``optional_imports``: numpy, onnx_ir and onnxscript, which only the translations import: this
  package imports without them, and :func:`to_onnx` then raises an ImportError naming the
  ``export`` extra.
"""

from __future__ import annotations

from ..errors import NoOnnxFormError
from ..runtime import lapack, ops  # noqa: F401  (registers the realify:: ops)
from .exporter import to_onnx
from .translation_table import onnx_translation_table

__all__ = ["NoOnnxFormError", "onnx_translation_table", "to_onnx"]
