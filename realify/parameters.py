"""Complex parameters stored as real ``(..., 2)`` pairs, for tools that want real parameters.

FSDP2 (``fully_shard``) needs one dtype per unit, so a module that mixes float32 and complex64
parameters cannot be one unit; FSDP1 cannot flatten complex parameters at all; some optimizers,
checkpoint formats and runtimes know real dtypes only. :func:`complex_parameters_as_real`
re-registers each complex parameter of a module as its real pairs (``torch.view_as_real``:
the same numbers, shape ``(*shape, 2)``, float32 for complex64) through
``torch.nn.utils.parametrize``, and the module reads it back as a complex view
(``torch.view_as_complex``) in forward. The module computes exactly what it computed before;
the optimizer updates the pairs, which for element-wise optimizers (SGD, Adam, AdamW, ...) is
the update it made on the complex values (PyTorch's optimizers step complex parameters as
their real views). Under realify, ``view_as_complex`` of the stored pairs costs nothing: the
layout pass reads them in place.
"""

from __future__ import annotations

import torch
import torch.nn as nn
from torch.nn.utils import parametrize


class _ComplexView(nn.Module):
    """``(*shape, 2)`` real pairs <-> the complex tensor they store."""

    def forward(self, pairs: torch.Tensor) -> torch.Tensor:
        return torch.view_as_complex(pairs)

    def right_inverse(self, value: torch.Tensor) -> tuple[torch.Tensor]:
        # a tuple: parametrize refuses a single stored tensor whose dtype differs from the value's
        return (torch.view_as_real(value).clone(),)


def complex_parameters_as_real(module: nn.Module) -> nn.Module:
    """Store every complex parameter of ``module`` (and its submodules) as real ``(..., 2)``
    pairs; ``module`` is changed in place and returned. Each such parameter ``name`` of a
    submodule ``m`` is then ``m.parametrizations[name].original0`` (what ``parameters()``
    yields and the optimizer updates), and ``m.name`` its complex view. Call it before
    sharding (``fully_shard``), compiling or creating the optimizer. A complex parameter that
    is already parametrized is refused with the parameter's name."""
    for owner_name, owner in list(module.named_modules()):
        if isinstance(owner, parametrize.ParametrizationList):
            if any(p.is_complex() for p in owner.parameters(recurse=False)):
                where = owner_name.replace("parametrizations.", "")
                raise ValueError(f"complex_parameters_as_real: {where} is already parametrized over a complex "
                                 "tensor; store it as real pairs inside its own parametrization instead")
            continue
        for name, param in list(owner.named_parameters(recurse=False)):
            if param.is_complex():
                parametrize.register_parametrization(owner, name, _ComplexView(), unsafe=True)
    return module
