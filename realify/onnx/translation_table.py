"""The ``custom_translation_table`` realify.onnx gives ``torch.onnx.export``.

It holds realify's FFT ops, and the aten ops whose default translations lose what realify's
rules rely on.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def onnx_translation_table() -> dict[Callable, Callable]:
    """Return the ``custom_translation_table`` entries realify needs, for ``torch.onnx.export``.

    They translate realify's custom ops (its FFTs on ``(re, im)`` pairs, with ONNX ``DFT``),
    and replace torch.onnx's translations of the aten ops whose defaults lose what realify's
    rules rely on: signs of zeros (``copysign``, ``signbit``, ``where``), ``hypot`` without
    overflow, ``expm1``/``log1p``/``atan2`` without cancellation near 0, istft's overlap-add
    and a Cholesky factorization, which ONNX lacks, and the ops torch.onnx translates wrongly
    at dynamic sizes (``roll`` by a size-dependent shift, ``mean`` over every dim, ``im2col``
    and ``cat`` of an empty batch) or that ONNX Runtime runs wrongly (``expand`` to a size of
    0), and ``masked_select`` and nearest-exact upsampling, which it lacks. :func:`to_onnx`
    passes them itself; pass them to ``torch.onnx.export`` to export a program of
    :func:`realify.export` directly.

    Returns
    -------
    dict
        Op overload (``torch.ops.realify.fft_c2c.default``, ``torch.ops.aten.expm1.default``,
        ...) to its onnxscript translation.

    Raises
    ------
    ImportError
        numpy, onnx_ir or onnxscript is missing; the message names the ``export`` extra
        (``pip install 'realify[export]'``).

    See Also
    --------
    to_onnx : exports with these translations.

    Examples
    --------
    >>> import torch
    >>> import realify.onnx
    >>> table = realify.onnx.onnx_translation_table()
    >>> len(table) > 0
    True
    >>> torch.ops.realify.fft_c2c.default in table, torch.ops.aten.expm1.default in table
    (True, True)
    >>> all(callable(translation) for translation in table.values())
    True
    """
    # onnxscript functions: imported here, as the modules that import onnxscript are only
    # imported when a program is exported (optional_imports)
    from .broadcasting import expand
    from .cholesky import linalg_cholesky_ex
    from .contractions import trilinear
    from .fft import fft_c2c, fft_c2c_pairs, fft_c2r, fft_r2c, fft_r2c_pairs
    from .joins import cat
    from .masked_select import masked_select
    from .overlap_add import unfold_backward
    from .pointwise import atan2, copysign, expm1, hypot, log1p, signbit, straight_through, where
    from .reductions import mean_dim
    from .resampling import upsample_nearest_exact
    from .rolls import roll
    from .sliding_blocks import im2col

    return {
        torch.ops.realify.fft_c2c.default: fft_c2c,
        torch.ops.realify.fft_r2c.default: fft_r2c,
        torch.ops.realify.fft_c2r.default: fft_c2r,
        torch.ops.realify.fft_c2c_pairs.default: fft_c2c_pairs,
        torch.ops.realify.fft_r2c_pairs.default: fft_r2c_pairs,
        # realify's rules read signs of zeros (branch cuts, C99 special values): the default
        # translations have no copysign and a signbit that is false for -0.0
        torch.ops.aten.copysign.Tensor: copysign,
        torch.ops.aten.signbit.default: signbit,
        torch.ops.prims.signbit.default: signbit,
        # |z| = hypot(re, im) must not overflow where re^2 + im^2 would
        torch.ops.aten.hypot.default: hypot,
        torch.ops.prims.hypot.default: hypot,
        # ONNX has no Expm1, Log1p or Atan2: the default translations cancel near 0
        # (Exp(x) - 1, Log(1 + x)) and give atan2(+0, -1) = -pi, atan2(y, -0) = -pi/2
        torch.ops.aten.expm1.default: expm1,
        torch.ops.aten.log1p.default: log1p,
        torch.ops.aten.atan2.default: atan2,
        # ONNX Runtime's CPU Where returns +0 where it selects a -0 from its second input
        torch.ops.aten.where.self: where,
        # istft's overlap-add: torch.onnx's translation is one ScatterND per frame position,
        # with int32 indices ONNX Runtime refuses
        torch.ops.aten.unfold_backward.default: unfold_backward,
        # a write autograd does not see (realify/engine/grad_semantics.py): the new value; ONNX has no
        # gradients
        torch.ops.realify.straight_through.default: straight_through,
        # ONNX has no Cholesky: the complex rule's real factorization (realify/rules/linalg.py),
        # unrolled
        torch.ops.aten.linalg_cholesky_ex.default: linalg_cholesky_ex,
        # realify's trace writes nn.Bilinear (which torch.export keeps, and torch.onnx translates) as
        # aten._trilinear, which torch.onnx has no translation for
        torch.ops.aten._trilinear.default: trilinear,
        # nn.functional.unfold: torch.onnx's Reshape to (N, C*kh*kw, -1) has no size to infer for
        # the -1 where N is 0 (ONNX Runtime refuses the model)
        torch.ops.aten.im2col.default: im2col,
        # a mean over every dim (dim=None): torch.onnx's translation writes a Reshape of the
        # absent dim argument, a Reshape with no input
        torch.ops.aten.mean.dim: mean_dim,
        # fftshift's roll by n // 2 of a dynamic n: torch.onnx writes the shift as a constant
        torch.ops.aten.roll.default: roll,
        # torch.onnx has no translation; realify's rule for a complex masked_select writes a real one
        torch.ops.aten.masked_select.default: masked_select,
        # torch.onnx drops each input of zero size and fails where all are (an empty batch)
        torch.ops.aten.cat.default: cat,
        # realify's trace writes interpolate(mode="nearest-exact") (whose .vec overload torch.export
        # keeps, and torch.onnx decomposes) as the .default overloads, which torch.onnx has no translation for
        torch.ops.aten._upsample_nearest_exact1d.default: upsample_nearest_exact,
        torch.ops.aten._upsample_nearest_exact2d.default: upsample_nearest_exact,
        torch.ops.aten._upsample_nearest_exact3d.default: upsample_nearest_exact,
        # ONNX Runtime's optimizer takes an Expand from 1 to 0 for a no-op (realify's pointwise
        # formulas broadcast an empty operand so)
        torch.ops.aten.expand.default: expand,
    }
