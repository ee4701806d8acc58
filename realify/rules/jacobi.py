"""The Hermitian (and real symmetric) eigenproblem in real arithmetic: cyclic Jacobi.

For runtimes without LAPACK: realify.onnx writes ``eigh`` with it (ONNX has no eigensolver).
Each rotation zeroes one off-diagonal entry (p, q) of H = Hr + i Hi. With
``b = H[p, q] = |b| e^{i phi}`` and ``a = H[p, p]``, ``d = H[q, q]`` (real), the unitary

    J = [[c, s], [-s w, c w]],   w = e^{-i phi},   t = s / c = 2|b| sgn(d - a) / (|d - a| + sqrt((d - a)^2 + 4|b|^2))

(``c = 1 / sqrt(1 + t^2)``; t = 0 where b = 0) makes ``J^H H J`` diagonal on the rows and
columns p, q: the phase w makes the entry real, then a real rotation by the smaller angle
(|theta| <= pi/4, the choice that converges). A sweep rotates every pair once, in the
round-robin order that splits each of its n - 1 rounds (n even; an odd n gets a dummy index)
into n/2 disjoint pairs, so a round is a few gathers and elementwise ops on the whole batch.
The vectors accumulate ``V <- V J``. Convergence is quadratic once the off-diagonal part is
small; :func:`sweeps_for` gives the fixed number of sweeps the export unrolls (docs/numerics.md,
"Jacobi"). The eigenvalues are the diagonal, sorted ascending as LAPACK returns them, and
each vector is a unit eigenvector; its phase (sign, for a real matrix) is Jacobi's, not LAPACK's.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch._higher_order_ops.scan import scan
from torch.fx.experimental.proxy_tensor import get_proxy_mode

from ._algebra import padd, pmul, psub

Part = Any  # a real tensor, or None for an exact zero (a real matrix's imaginary part)


def round_robin(n: int, rounds: int, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """(p, q), each (rounds, n/2): round r's disjoint pairs p < q (n even), the n - 1 rounds
    of a sweep meeting every pair once, repeated. The circle method: index 0 fixed, the others
    on a ring that turns by one each round; made with arange and remainder, not as a constant
    (a decomposition that builds a tensor from data cannot be traced functionally)."""
    r = torch.arange(rounds, device=device).unsqueeze(-1)
    k = torch.arange(n // 2, device=device)

    def ring(j: torch.Tensor) -> torch.Tensor:
        return torch.where(j == 0, 0, 1 + torch.remainder(j - 1 - r, n - 1))

    left, right = ring(k), ring(n - 1 - k)
    return torch.minimum(left, right), torch.maximum(left, right)


def sweeps_for(n: int, dtype: torch.dtype) -> int:
    """Sweeps after which every column of V is an eigenvector to within 10 n u ||H|| (the
    residual ||H v - l v||; the eigenvalues converge earlier, their error being the square of
    the off-diagonal part's), measured at n = 4 .. 64 with condition numbers 1 to 1e6
    (docs/numerics.md, "Jacobi"): 3, 5, 7, 10, 11 sweeps in single precision, and in double 4,
    6, 10-11 at n = 4, 8, 16. Clusters of equal values slow the convergence to linear: two
    8-fold values at n = 16 take 14 sweeps in double; at n >= 32 V's own roundings (about
    sweeps * n per entry) keep the residual a few times above the bound."""
    log_n = math.ceil(math.log2(max(n, 2)))
    return 2 * log_n + 1 if torch.finfo(dtype).bits <= 32 else 3 * log_n + 4


def _columns(x: torch.Tensor, index: list[int]) -> torch.Tensor:
    return x[..., index]


def _rows(x: torch.Tensor, index: list[int]) -> torch.Tensor:
    return x[..., index, :]


def _scaled(c: torch.Tensor, xr: torch.Tensor, xi: Part) -> tuple[torch.Tensor, Part]:
    return c * xr, None if xi is None else c * xi


def _combine(c, s, wr, wi, pr, pi, qr, qi) -> tuple[tuple, tuple]:
    """(c p - s w q, s p + c w q) for vectors p, q (parts) and w = wr + i wi (wi None: real)."""
    if wi is None:
        wqr, wqi = wr * qr, None if qi is None else wr * qi
    else:
        qi_ = torch.zeros_like(qr) if qi is None else qi
        wqr, wqi = wr * qr - wi * qi_, wr * qi_ + wi * qr
    new_p = (c * pr - s * wqr, psub(pmul(c, pi), pmul(s, wqi)))
    new_q = (s * pr + c * wqr, padd(pmul(s, pi), pmul(c, wqi)))
    return new_p, new_q


def _rotate(hr, hi, vr, vi, p: list[int], q: list[int], inverse: list[int]):
    """One round: the rotations of the disjoint pairs (p[k], q[k]), applied to H's columns and
    rows and V's columns. ``inverse`` puts the columns [p..., q...] back in order."""
    a = hr[..., p, p]
    d = hr[..., q, q]
    br = hr[..., p, q]
    bi = None if hi is None else hi[..., p, q]
    # |b| and w = e^{-i phi} = conj(b) / |b| from b scaled by its larger part: squares of entries
    # near the underflow threshold (late sweeps) would make |w| != 1 and J not unitary, and ONNX
    # has no hypot. w = 1 where b = 0; a real b gives w = sgn(b).
    scale = br.abs() if bi is None else torch.maximum(br.abs(), bi.abs())
    zero = scale == 0
    safe = torch.where(zero, 1.0, scale)
    ur = torch.where(zero, 1.0, br / safe)
    ui = None if bi is None else bi / safe
    norm = ur.abs() if ui is None else torch.sqrt(ur * ur + ui * ui)
    magnitude = scale * norm
    gap = d - a
    # t = 2|b| sgn(d - a) / (|d - a| + sqrt((d - a)^2 + 4|b|^2)), sgn(0) = 1; 0 where b = 0
    denominator = gap.abs() + torch.sqrt(gap * gap + 4 * magnitude * magnitude)
    t = torch.where(zero, 0.0, 2 * magnitude / torch.where(denominator == 0, 1.0, denominator))
    t = torch.where(gap < 0, -t, t)
    c = torch.rsqrt(1 + t * t)
    s = t * c
    wr = ur / norm
    wi = None if ui is None else -ui / norm
    c_, s_ = c.unsqueeze(-2), s.unsqueeze(-2)
    wr_, wi_ = wr.unsqueeze(-2), None if wi is None else wi.unsqueeze(-2)

    def columns(xr, xi):
        # X J: columns p, q become c X_p - s w X_q and s X_p + c w X_q
        (pr, pi), (qr, qi) = _combine(c_, s_, wr_, wi_, _columns(xr, p), None if xi is None else _columns(xi, p),
                                      _columns(xr, q), None if xi is None else _columns(xi, q))
        new_r = torch.cat([pr, qr], dim=-1)[..., inverse]
        new_i = None if pi is None else torch.cat([pi, qi], dim=-1)[..., inverse]
        return new_r, new_i

    hr, hi = columns(hr, hi)
    vr, vi = columns(vr, vi)
    # J^H (H J): rows p, q become c G_p - s conj(w) G_q and s G_p + c conj(w) G_q
    (pr, pi), (qr, qi) = _combine(c.unsqueeze(-1), s.unsqueeze(-1), wr.unsqueeze(-1),
                                  None if wi is None else -wi.unsqueeze(-1),
                                  _rows(hr, p), None if hi is None else _rows(hi, p),
                                  _rows(hr, q), None if hi is None else _rows(hi, q))
    hr = torch.cat([pr, qr], dim=-2)[..., inverse, :]
    hi = None if pi is None else torch.cat([pi, qi], dim=-2)[..., inverse, :]
    return hr, hi, vr, vi


def hermitian_eigen_parts(hr: torch.Tensor, hi: Part, sweeps: int | None = None
                          ) -> tuple[torch.Tensor, torch.Tensor, Part]:
    """(eigenvalues ascending, vectors' real part, imaginary part) of the Hermitian matrix
    hr + i hi (both triangles given; ``hi`` None for a real symmetric one), by ``sweeps`` cyclic
    Jacobi sweeps (default :func:`sweeps_for`)."""
    n = hr.shape[-1]
    if not isinstance(n, int):
        raise NotImplementedError("eigh in real arithmetic needs a static matrix size (the Jacobi sweeps are "
                                  "unrolled); leading batch dims may be dynamic")
    sweeps = sweeps_for(n, hr.dtype) if sweeps is None else sweeps
    padded = n + n % 2
    if padded != n:  # a dummy index, decoupled from the rest
        hr = torch.nn.functional.pad(hr, (0, 1, 0, 1))
        hi = None if hi is None else torch.nn.functional.pad(hi, (0, 1, 0, 1))
    vr = torch.eye(padded, dtype=hr.dtype, device=hr.device).expand(hr.shape).clone()
    vi = None if hi is None else torch.zeros_like(vr)
    if n > 1:
        hr, hi, vr, vi = _sweep(hr, hi, vr, vi, sweeps)
    values = hr.diagonal(dim1=-2, dim2=-1)[..., :n]
    vr, vi = vr[..., :n, :n], None if vi is None else vi[..., :n, :n]
    values, order = torch.sort(values, dim=-1)
    index = order.unsqueeze(-2).expand(vr.shape)
    return values, vr.gather(-1, index), None if vi is None else vi.gather(-1, index)


def _sweep(hr, hi, vr, vi, sweeps: int):
    """``sweeps`` sweeps of rotations. Traced for export with static sizes, one scan over the
    rounds (the rounds' pairs are its input): ONNX writes it as one Scan whose body is a single
    round, so the model's size does not grow with n or the number of sweeps."""
    n = hr.shape[-1]
    p, q = round_robin(n, sweeps * (n - 1), hr.device)
    index = [p, q, torch.argsort(torch.cat([p, q], dim=-1), dim=-1)]  # where [p, q]'s columns go back
    carry = (hr, vr) if hi is None else (hr, hi, vr, vi)

    def one_round(carry, pairs):
        hr, hi, vr, vi = (carry[0], None, carry[1], None) if len(carry) == 2 else carry
        hr, hi, vr, vi = _rotate(hr, hi, vr, vi, *pairs)
        # scan's per-step output, unused
        return ((hr, vr) if hi is None else (hr, hi, vr, vi)), hr.new_zeros(())

    if get_proxy_mode() is None or not all(isinstance(d, int) for d in hr.shape):
        # run, not traced: a loop (eager's scan would compile its body with dynamo, whose
        # dynamic-shape guesses then leak into later exports). Traced with a dynamic batch: the
        # rounds unrolled (torch.onnx cannot write a scan whose body sees symbolic sizes)
        for k in range(p.shape[0]):
            carry, _ = one_round(carry, [x[k] for x in index])
    else:
        # the body is traced with dynamo, whose automatic dynamic shapes would otherwise see a
        # second export of the same body with other carries (a real matrix after a complex one)
        # as a reason to make sizes symbolic, and lift them as inputs torch.onnx cannot write
        with torch._dynamo.config.patch(automatic_dynamic_shapes=False):
            carry, _ = scan(one_round, carry, index)
    return (carry[0], None, carry[1], None) if len(carry) == 2 else carry
