"""Complex products along a dimension, on planar (re, im) parts: the building blocks of an
order of multiplication, and the device-neutral order every traced graph uses unless a pass
is told its target (docs/numerics.md, "Reductions").

Complex multiplication by the formula ``(ac - bd) + (ad + bc) i`` (eager's, with no recovery
of infinities) is not associative once a part is infinite or NaN: ``(1 + 0i)(inf + 0i) =
inf + nan i``, so the product's special values depend on the order of the factors. Finite
values differ between orders only in their last bits.
"""

from __future__ import annotations

import torch

# Chains of up to this many factors are multiplied left to right (one graph step each); longer
# ones as a balanced tree, log2(n) rounds instead of n - 1 steps in the graph.
FOLD_LIMIT = 32


def cmul(ar: torch.Tensor, ai: torch.Tensor, br, bi) -> tuple[torch.Tensor, torch.Tensor]:
    """(ar + ai i)(br + bi i) = (ar br - ai bi) + (ar bi + ai br) i, elementwise, broadcast."""
    return ar * br - ai * bi, ar * bi + ai * br


def times_one(re: torch.Tensor, im: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # (a + bi)(1 + 0i) = (a - 0b) + (0a + b)i. Eager's products start from an accumulator
    # 1 + 0i, so an infinite factor gives inf + nan i (0 * inf); doing the same multiplication
    # reproduces its special values (finite values are unchanged).
    return cmul(re, im, 1.0, 0.0)


def narrow_parts(re: torch.Tensor, im: torch.Tensor, dim: int, start: int, length: int):
    return re.narrow(dim, start, length), im.narrow(dim, start, length)


def tree_product(re: torch.Tensor, im: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Product of the entries along ``dim`` (at least one; kept with size 1): pairwise,
    log2(n) rounds, no factor 1 + 0i.

    Each round multiplies the first half by the second half (complex multiplication is
    commutative); an odd last entry is carried to the next round.
    """
    n = re.shape[dim]
    while n > 1:
        half = n // 2
        ar, ai = narrow_parts(re, im, dim, 0, half)
        br, bi = narrow_parts(re, im, dim, half, half)
        pr, pi = cmul(ar, ai, br, bi)
        if n % 2:
            cr, ci = narrow_parts(re, im, dim, n - 1, 1)
            pr, pi = torch.cat([pr, cr], dim), torch.cat([pi, ci], dim)
        re, im, n = pr, pi, half + n % 2
    return re, im


def fold(re: torch.Tensor, im: torch.Tensor, dim: int, start: int, acc: tuple | None) -> tuple:
    """``acc`` times the entries from ``start`` on along ``dim``, one at a time, left to right."""
    for k in range(start, re.shape[dim]):
        z = narrow_parts(re, im, dim, k, 1)
        acc = z if acc is None else cmul(*acc, *z)
    return acc


def chain_product(re: torch.Tensor, im: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``z0 z1 ... z(n-1)`` along ``dim`` (n >= 1, kept with size 1), no factor 1 + 0i: left
    to right up to :data:`FOLD_LIMIT` factors, a balanced tree beyond."""
    if re.shape[dim] <= FOLD_LIMIT:
        return fold(re, im, dim, 1, narrow_parts(re, im, dim, 0, 1))
    return tree_product(re, im, dim)


def empty_product(re: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """1 + 0i, shaped as a product along ``dim`` (kept with size 1) of no entries."""
    zero = re.sum(dim, keepdim=True)
    return zero + 1, zero


def neutral_product(re: torch.Tensor, im: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The device-neutral order of a product along ``dim`` (kept with size 1), whatever the
    tensor's layout: eager's accumulator ``1 + 0i`` times the entries, left to right up to
    :data:`FOLD_LIMIT` of them, ``((1 z0) z1) z2 ...`` (the order of every eager CPU kernel
    for a contiguous run shorter than one vector block), ``1 + 0i`` times their balanced tree
    beyond (a graph of log2(n) rounds)."""
    n = re.shape[dim]
    if n == 0:
        return empty_product(re, dim)
    if n <= FOLD_LIMIT:
        return fold(re, im, dim, 1, times_one(*narrow_parts(re, im, dim, 0, 1)))
    return times_one(*tree_product(re, im, dim))
