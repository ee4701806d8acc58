"""The third-party modules realify.onnx's translations are written with: numpy, onnx_ir and
onnxscript's opset 20 (``op``). Only the translations import this module, when
:func:`realify.onnx.to_onnx` or :func:`realify.onnx.onnx_translation_table` runs: where one is
missing, an ImportError names the ``export`` extra (``pip install 'realify[export]'``)."""

from __future__ import annotations

from .._optional import import_optional

np = import_optional("numpy", extra="export", purpose="realify.onnx.to_onnx")
ir = import_optional("onnx_ir", extra="export", purpose="realify.onnx.to_onnx")
op = import_optional("onnxscript", extra="export", purpose="realify.onnx.to_onnx").opset20
