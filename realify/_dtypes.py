"""The complex <-> real dtype correspondence used everywhere in realify."""

from __future__ import annotations

import torch

COMPLEX_TO_REAL: dict[torch.dtype, torch.dtype] = {
    torch.complex32: torch.float16,
    torch.complex64: torch.float32,
    torch.complex128: torch.float64,
}
REAL_TO_COMPLEX: dict[torch.dtype, torch.dtype] = {v: k for k, v in COMPLEX_TO_REAL.items()}


def real_dtype(dtype: torch.dtype) -> torch.dtype:
    """float32 for complex64 (and float32 itself); real dtypes map to themselves."""
    return COMPLEX_TO_REAL.get(dtype, dtype)


def complex_dtype(dtype: torch.dtype) -> torch.dtype:
    """complex64 for float32 (and complex64 itself). Integer/bool dtypes promote like eager."""
    if dtype.is_complex:
        return dtype
    if not dtype.is_floating_point:
        dtype = torch.get_default_dtype()
    if dtype == torch.bfloat16:
        raise TypeError("bfloat16 has no complex counterpart in PyTorch; cast to float32 first")
    return REAL_TO_COMPLEX[dtype]
