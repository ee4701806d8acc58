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
    """Store every complex parameter of ``module`` and its submodules as real ``(..., 2)`` pairs.

    ``module`` is changed in place and returned. Each complex parameter ``name`` of a submodule
    ``m`` is then ``m.parametrizations[name].original0`` (the real pairs, what ``parameters()``
    yields and the optimizer updates), and ``m.name`` its complex view, which forward reads.
    Call it before sharding (``fully_shard``), compiling or creating the optimizer. Real
    parameters are left as they are.

    Parameters
    ----------
    module : torch.nn.Module
        The module whose complex parameters to store as pairs.

    Returns
    -------
    torch.nn.Module
        ``module`` itself, its complex parameters now real pairs.

    Raises
    ------
    ValueError
        A complex parameter is already parametrized (the message names it): store it as real
        pairs inside its own parametrization instead.

    See Also
    --------
    torch.nn.utils.parametrize.register_parametrization : the mechanism used.

    Notes
    -----
    The pairs hold the same numbers as the complex values (``torch.view_as_real``), so the
    module computes exactly what it computed before, and element-wise optimizers (SGD, Adam,
    AdamW, ...) make the same update on the pairs as on the complex values.

    Examples
    --------
    >>> import torch
    >>> import realify
    >>> layer = torch.nn.Linear(3, 2, dtype=torch.complex64)
    >>> z = torch.tensor([[1 + 2j, 3 - 1j, 0.5j]])
    >>> before = layer(z)
    >>> realify.complex_parameters_as_real(layer) is layer
    True
    >>> [(name, p.dtype, tuple(p.shape)) for name, p in layer.named_parameters()]
    [('parametrizations.weight.original0', torch.float32, (2, 3, 2)),
     ('parametrizations.bias.original0', torch.float32, (2, 2))]
    >>> layer.weight.dtype
    torch.complex64
    >>> torch.equal(layer(z), before)
    True
    """
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
