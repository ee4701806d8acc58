"""Eager ops inside realify's custom ops' kernels: the dispatch keys eager runs them with, and
results laid out as the fake implementations promise."""

from __future__ import annotations

import contextlib
import functools
import operator

import torch


def contiguous_copy(x: torch.Tensor) -> torch.Tensor:
    # The fake implementation promises these strides to the inner compiler, which reads the
    # real outputs by them (Inductor asserts them): an op's fake (meta) kernel and its real
    # kernel need not lay out their results alike, a contiguous copy is the same in both.
    return x.clone(memory_format=torch.contiguous_format)


# Dispatch keys eager itself leaves off inside a custom op's kernel: autograd (the op's
# own backward stands in for it) and autocast (applied before the island was recorded).
_KERNEL_EXCLUDED = functools.reduce(operator.or_, [
    torch._C.DispatchKeySet(torch._C.DispatchKey.Autograd),
    *(torch._C.DispatchKeySet(getattr(torch._C.DispatchKey, name))
      for name in dir(torch._C.DispatchKey) if name.startswith("Autocast"))])


@contextlib.contextmanager
def eager_dispatch():
    """Run an eager op inside a custom op's kernel (an island, a LAPACK call) with the dispatch
    keys eager would run it with.

    A custom op's kernel called under a ``TorchDispatchMode`` runs with every key above
    Python's excluded, Conjugate and Negative among them. ATen's composite ops make lazily
    conjugated views (``linalg.pinv`` multiplies by ``U.mH``), and with those keys off the
    conjugation is silently dropped: ``pinv`` of a complex (5, 3) matrix came out wrong by
    1.1. AOTAutograd runs a compiled graph's first call under such a mode (its check that
    custom ops do not alias their inputs), so Inductor's first call of every island was
    affected; with functorch's keys off too, the backward island's ``torch.func.vjp`` fails
    under such a mode ("Cannot access storage of TensorWrapper"). Only tensors that carry a key
    are dispatched to it, and the island's inputs are plain real tensors: re-enabling the keys
    reaches only the op's own intermediate values."""
    exclude = torch._C._dispatch_tls_local_exclude_set()
    kept = exclude & _KERNEL_EXCLUDED
    if kept.raw_repr() == exclude.raw_repr():
        yield
        return
    with torch._C._ForceDispatchKeyGuard(torch._C._dispatch_tls_local_include_set(), kept):
        yield
