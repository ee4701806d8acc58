"""Functional collectives (``torch.ops._c10d_functional``) on complex values: what DTensor's
redistributions run (a ``Partial`` summed into ``Replicate`` or ``Shard``, ``Shard`` gathered
into ``Replicate``) and what tensor-parallel layers' graphs hold.

Each collective on a complex tensor is the same collective on its ``(re, im)`` pairs
(``view_as_real``'s layout, one real tensor): sums and averages act on each part, and gathers,
scatters, all-to-alls and broadcasts move whole elements along dimension 0, never the trailing
pair dimension. One collective per complex value, as eager's on the complex tensor.

A collective returns before it completes; ``wait_tensor`` on its result waits for it. The
complex result's parts are two views of the one pairs tensor the collective returned, and
``wait_tensor`` waits on that tensor: waiting on a copy of the parts (an eager island's new
complex tensor) would not wait at all, and the parts would be read before the sum arrived.
"""

from __future__ import annotations

import torch

from ..errors import MissingRuleError
from ..runtime.complex_tensor import ComplexTensor
from . import register
from ._operands import parts, stacked_pairs

# reductions defined on complex values (eager's process groups refuse max, min and product)
_LINEAR_REDUCTIONS = ("sum", "avg")


def _from_pairs(pairs: torch.Tensor) -> ComplexTensor:
    return ComplexTensor(pairs[..., 0], pairs[..., 1])


def _check_reduction(op, reduce_op: str) -> None:
    if str(reduce_op).lower() not in _LINEAR_REDUCTIONS:
        raise MissingRuleError(op, detail=f"a {reduce_op!r} reduction of complex values (only sum and avg are "
                                          "defined on complex numbers)")


if torch.distributed.is_available():
    import torch.distributed._functional_collectives

    functional = torch.ops._c10d_functional
    with_autograd = getattr(torch.ops, "_c10d_functional_autograd", None)

    def _variants(name: str) -> list:
        ops = [getattr(functional, name).default]
        if with_autograd is not None and hasattr(with_autograd, name):
            ops.append(getattr(with_autograd, name).default)
        return ops

    @register(functional.all_reduce.default)
    def all_reduce(input, reduce_op, group_name):
        # sum_k (a_k + b_k i) = sum_k a_k + (sum_k b_k) i, on the pairs in one collective
        _check_reduction(functional.all_reduce.default, reduce_op)
        return _from_pairs(functional.all_reduce.default(stacked_pairs(input), reduce_op, group_name))

    @register(functional.all_reduce_coalesced.default)
    def all_reduce_coalesced(inputs, reduce_op, group_name):
        _check_reduction(functional.all_reduce_coalesced.default, reduce_op)
        complex_ = [isinstance(x, ComplexTensor) for x in inputs]
        results = functional.all_reduce_coalesced.default(
            [stacked_pairs(x) if c else x for x, c in zip(inputs, complex_)], reduce_op, group_name)
        return [_from_pairs(r) if c else r for r, c in zip(results, complex_)]

    @register(*_variants("all_gather_into_tensor"))
    def all_gather_into_tensor(input, group_size, group_name):
        # the ranks' values concatenated along dim 0: the pairs' dim 0 is the value's
        if input.dim() == 0:
            raise MissingRuleError(functional.all_gather_into_tensor.default, detail="a 0-dim complex input")
        return _from_pairs(functional.all_gather_into_tensor.default(stacked_pairs(input), group_size, group_name))

    @register(*_variants("reduce_scatter_tensor"))
    def reduce_scatter_tensor(input, reduce_op, group_size, group_name):
        _check_reduction(functional.reduce_scatter_tensor.default, reduce_op)
        return _from_pairs(functional.reduce_scatter_tensor.default(stacked_pairs(input), reduce_op, group_size,
                                                                    group_name))

    @register(*_variants("all_to_all_single"))
    def all_to_all_single(input, output_split_sizes, input_split_sizes, group_name):
        return _from_pairs(functional.all_to_all_single.default(stacked_pairs(input), output_split_sizes,
                                                                input_split_sizes, group_name))

    @register(functional.broadcast.default)
    def broadcast(input, src, group_name):
        return _from_pairs(functional.broadcast.default(stacked_pairs(input), src, group_name))

    @register(functional.wait_tensor.default)
    def wait_tensor(tensor):
        # wait on the pairs the collective returned (see the module's docstring); parts of
        # anything else are each waited on
        re, im = parts(tensor)
        base = re._base
        if base is not None and im is not None and im._base is base and tuple(base.shape) == (*re.shape, 2):
            return _from_pairs(functional.wait_tensor.default(base))
        waited = functional.wait_tensor.default(re)
        return ComplexTensor(waited, torch.zeros_like(waited) if im is None else functional.wait_tensor.default(im))
