"""The complex <-> real dtype correspondence used everywhere in realify, and the two
conversions between a complex tensor and its real parts that every dtype needs (complex32,
ComplexHalf, has few kernels: its values pass through complex64 here, and only here)."""

from __future__ import annotations

import torch

COMPLEX_TO_REAL: dict[torch.dtype, torch.dtype] = {
    torch.complex32: torch.float16,
    torch.complex64: torch.float32,
    torch.complex128: torch.float64,
}
REAL_TO_COMPLEX: dict[torch.dtype, torch.dtype] = {v: k for k, v in COMPLEX_TO_REAL.items()}


# ATen's names of the dtypes (c10::ScalarType), as its error messages give them
_SCALAR_TYPE_NAMES: dict[torch.dtype, str] = {
    torch.bool: "Bool", torch.uint8: "Byte", torch.int8: "Char", torch.int16: "Short", torch.int32: "Int",
    torch.int64: "Long", torch.uint16: "UInt16", torch.uint32: "UInt32", torch.uint64: "UInt64",
    torch.float16: "Half", torch.bfloat16: "BFloat16", torch.float32: "Float", torch.float64: "Double",
    torch.complex32: "ComplexHalf", torch.complex64: "ComplexFloat", torch.complex128: "ComplexDouble",
    torch.float8_e4m3fn: "Float8_e4m3fn", torch.float8_e5m2: "Float8_e5m2",
    torch.float8_e4m3fnuz: "Float8_e4m3fnuz", torch.float8_e5m2fnuz: "Float8_e5m2fnuz",
}


def scalar_type_name(dtype: torch.dtype) -> str:
    """ATen's name of ``dtype`` in its error messages ("ComplexFloat" for complex64)."""
    return _SCALAR_TYPE_NAMES.get(dtype, str(dtype).removeprefix("torch."))


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


def pairs_of(z: torch.Tensor) -> torch.Tensor:
    """The real ``(*shape, 2)`` pairs of complex ``z``: a view of it (lazy conj/neg bits
    resolved first), or for complex32 float16 pairs through a complex64 copy."""
    if z.dtype == torch.complex32:
        return torch.view_as_real(z.to(torch.complex64)).to(torch.float16)
    return pairs_view(z)


def pairs_view(z: torch.Tensor) -> torch.Tensor:
    """:func:`pairs_of` of a complex64 or complex128 ``z``: always a view (the compile backend's
    boundary calls it on every call, where the input's dtype is known in advance)."""
    if z.is_conj() or z.is_neg():
        z = z.resolve_conj().resolve_neg()
    return torch.view_as_real(z)


def complex_of(re: torch.Tensor, im: torch.Tensor) -> torch.Tensor:
    """The complex tensor with real part ``re`` and imaginary part ``im`` (complex32 for
    float16 parts, through complex64)."""
    if re.dtype == torch.float16:
        return torch.complex(re.float(), im.float()).to(torch.complex32)
    return torch.complex(re, im)
