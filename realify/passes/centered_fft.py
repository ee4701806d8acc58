"""Centered FFTs: half-size rolls around a transform become sign modulations.

Imaging code (MRI, optics, radio astronomy, microscopy) writes every transform centered,
``fftshift(fft2(ifftshift(x)))``: both shifts are rolls by half the size. For an even length
n the DFT turns each such roll into a modulation by ``(-1)^j`` on the other side, since
``w^(n/2) = -1`` for ``w = exp(∓2πi/n)``:

- a roll of the input by n/2, ``x'[j] = x[j - n/2]``:  ``F(x')[k] = (-1)^k F(x)[k]``;
- a roll of the output by n/2:  ``F(x)[k - n/2] = F((-1)^j x)[k]``;
- both:  ``F(x')[k - n/2] = (-1)^(n/2) (-1)^k F((-1)^j x)[k]``

(the same for the inverse transform, with any ``norm``: the signs are real and the scale is
linear). The transform is separable, so each transformed dim is rewritten on its own. The
signs are exact, and a compiler fuses their products into the pointwise kernels already
around the transform (the coil sensitivities before an MRI operator's FFT, an optical
transfer function after), where each roll was a copy of its own.

One-sided transforms: ``rfft``'s halved last dim takes a roll of its (real) input but not a
roll of its half spectrum (that is not the full spectrum's roll), and ``irfft``'s the reverse;
their other dims are complex transforms and take both.

A roll is absorbed only where the transformed dim's size is static and even and the shift is
n/2 modulo n (``fftshift`` and ``ifftshift`` agree there). A roll of the output is absorbed
only where the transform's output has no other reader; a roll over other dims too keeps
those as a roll. Odd sizes keep their rolls. Runs on the functional complex graph, before
planarize, for every front end (realify/passes/pipeline.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.fx as fx

from .cleanup import call_on_fakes

aten = torch.ops.aten
_TRANSFORMS = (aten._fft_c2c.default, aten._fft_r2c.default, aten._fft_c2r.default)


def centered_transforms_as_modulations(gm: fx.GraphModule) -> None:
    """Absorb half-size rolls of each FFT's input and output (module docstring)."""
    changed = False
    for fft in [n for n in gm.graph.nodes if n.op == "call_function" and n.target in _TRANSFORMS]:
        changed |= _absorb_rolls(gm.graph, fft)
    if changed:
        gm.recompile()


def _absorb_rolls(graph: fx.Graph, fft: fx.Node) -> bool:
    source = fft.args[0]
    dims = [d % fft.meta["val"].dim() for d in fft.args[1]]
    # the halved dim (the last transformed one) of a one-sided transform takes a roll on its
    # real side only
    halved = dims[-1] if fft.target is not aten._fft_c2c.default else None
    in_ok = [d for d in dims if not (fft.target is aten._fft_c2r.default and d == halved)]
    out_ok = [d for d in dims if not (fft.target is aten._fft_r2c.default and d == halved)]
    rolled_in = _half_rolled_dims(source, in_ok) if isinstance(source, fx.Node) else []
    (reader,) = fft.users if len(fft.users) == 1 else (None,)
    rolled_out = _half_rolled_dims(reader, out_ok) if reader is not None else []
    if not rolled_in and not rolled_out:
        return False
    # the input without its absorbed rolls, times the signs the output's absorbed rolls ask for;
    # the output times the signs the input's absorbed rolls ask for
    with graph.inserting_before(fft):
        new_source = _without_rolls(graph, source, rolled_in) if rolled_in else source
        new_source = _modulated(graph, new_source, rolled_out, flip=())
    fft.replace_input_with(source, new_source)
    with graph.inserting_before(fft.next):
        # (-1)^(n/2) where a dim's input and output were both rolled
        result = _modulated(graph, fft, rolled_in, flip=[d for d in rolled_in if d in rolled_out])
    if result is not fft:
        fft.replace_all_uses_with(result, delete_user_cb=lambda user: user is not result)
    if rolled_out:
        with graph.inserting_before(reader):
            reader.replace_all_uses_with(_without_rolls(graph, reader, rolled_out, value=reader.args[0]))
        graph.erase_node(reader)
    if rolled_in and not source.users:
        graph.erase_node(source)
    return True


def _half_rolled_dims(node: fx.Node, dims: Sequence[int]) -> list[int]:
    """The dims among ``dims`` that ``node``, a roll, shifts by half their even static size."""
    if node.op != "call_function" or node.target is not aten.roll.default:
        return []
    shifts, roll_dims = _shifts_and_dims(node)
    value = node.args[0].meta["val"]
    found = []
    for shift, dim in zip(shifts, roll_dims):
        n = value.shape[dim]
        if dim in dims and isinstance(n, int) and isinstance(shift, int) and n % 2 == 0 and shift % n == n // 2:
            found.append(dim)
    return found


def _shifts_and_dims(roll: fx.Node) -> tuple[list, list[int]]:
    shifts = roll.args[1]
    roll_dims = roll.args[2] if len(roll.args) > 2 else roll.kwargs.get("dims", [])
    rank = roll.args[0].meta["val"].dim()
    shifts = [shifts] if isinstance(shifts, int) else list(shifts)
    roll_dims = [roll_dims] if isinstance(roll_dims, int) else list(roll_dims)
    if len(roll_dims) != len(shifts):
        return [], []  # a roll of the flattened tensor
    return shifts, [d % rank for d in roll_dims]


def _without_rolls(graph: fx.Graph, roll: fx.Node, absorbed: Sequence[int], value: fx.Node | None = None):
    """``roll``'s input (or ``value``) rolled along the roll's dims not in ``absorbed`` only."""
    shifts, dims = _shifts_and_dims(roll)
    kept = [(s, d) for s, d in zip(shifts, dims) if d not in absorbed]
    base = roll.args[0] if value is None else value
    if not kept:
        return base
    return _made(call_on_fakes(graph, aten.roll.default, base, [s for s, _ in kept], [d for _, d in kept]))


def _modulated(graph: fx.Graph, value: fx.Node, dims: Sequence[int], flip: Sequence[int]):
    """``value`` times ``(-1)^i`` along each of ``dims`` (i the index there), and times -1 for
    each dim in ``flip`` whose size is 2 mod 4 ((-1)^(n/2)); ``value`` itself where ``dims``
    is empty."""
    if not dims:
        return value
    val = value.meta["val"]
    real = val.real.dtype if val.is_complex() else val.dtype
    signs = None
    for d in dims:
        n = val.shape[d]
        index = call_on_fakes(graph, aten.arange.default, n, dtype=torch.int64, device=val.device,
                              fake_mode=val.fake_mode)
        odd = call_on_fakes(graph, aten.bitwise_and.Scalar, index, 1)
        # 1 - 2 (i & 1), negated where (-1)^(n/2) = -1
        first = -1 if d in flip and (n // 2) % 2 else 1
        sign = call_on_fakes(graph, aten.mul.Tensor, odd, -2 * first)
        sign = call_on_fakes(graph, aten.add.Tensor, sign, first)
        sign = call_on_fakes(graph, aten._to_copy.default, sign, dtype=real)
        shape = [n if i == d else 1 for i in range(val.dim())]
        sign = call_on_fakes(graph, aten.view.default, sign, shape)
        signs = sign if signs is None else call_on_fakes(graph, aten.mul.Tensor, signs, sign)
    return _made(call_on_fakes(graph, aten.mul.Tensor, value, signs))


def _made(node: fx.Node | None) -> fx.Node:
    # a roll and a product on the values the graph already holds: their meta never refuses
    assert node is not None, "centered_fft: a roll or a sign product refused its fake values"
    return node
