"""The pipeline: which graph rewrite runs when, for which front end, under which options.

Every graph rewrite of realify runs from one of the stages below; the engine and the front
ends call the stage they reach and list no pass themselves. A graph meets the stages in this
order:

1. :func:`functional_graph`: the functional graph of the program, still complex, before
   planarize. Every front end (``decompose``, hence the compile backend, ``export``/ONNX and
   ``explain``).
2. :func:`real_graph`: the real graph planarize made. Every front end; the options are
   ``decompose``'s (the compile backend sets ``fusion_barriers`` under Inductor,
   ``pair_products`` from ``realify.config.interleaved_products`` and, where it targets a CPU,
   ``cpu_vector_bytes``: the width of that CPU's vectors, which it reads from the host).
3. :func:`compile_backend_real_graph`: the compile backend only, on the real graph before its
   inner compiler sees it (what the inner compiler is, and whether the graph is differentiated,
   decide the writes to inputs).
4. Inside Inductor, after AOTAutograd (the compile backend with Inductor as its inner compiler
   only; realify/inductor.py installs them after any the caller set):
   :func:`inductor_joint_graph_passes` on the joint forward-and-backward graph, before the
   split; :func:`inductor_post_grad_passes` on the forward and the backward graph each.

The Inductor passes change how a real graph runs, never a value; they import Inductor, so they
are imported only when stage 4 is asked for.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch.fx as fx

from . import gemm_form
from .autocast import lower_precision_products
from .centered_fft import centered_transforms_as_modulations
from .cleanup import (
    copies_to_views,
    inplace_views_to_functional,
    mutations_to_outputs,
    refuse_metadata_changes_of_inputs,
    stop_gradients_as_detach,
    strip_fusion_barriers,
    unread_outputs_not_asked,
)
from .fft_bands import transform_only_bands
from .gauss import gauss_products
from .input_writes import read_written_inputs_once, return_written_regions, write_inputs_in_place
from .layout import place_pairs
from .product_order import expand_complex_products
from .unit_dims import unit_dims_as_unsqueezes


def functional_graph(gm: fx.GraphModule, input_names: Sequence[str]) -> list[int]:
    """Stage 1, on the functional graph (every front end): in-place views made functional, a
    change of an input's metadata refused (``input_names`` name the inputs in the message),
    writes to inputs made extra outputs, ``*_copy`` ops back to views, spectral ops asked
    for no vectors nothing reads, half-size rolls around FFTs as sign modulations
    (realify/passes/centered_fft.py). Returns the positions of the inputs the program writes
    (realify/passes/cleanup.py)."""
    inplace_views_to_functional(gm)
    refuse_metadata_changes_of_inputs(gm, input_names)
    mutated = mutations_to_outputs(gm)
    copies_to_views(gm)
    unread_outputs_not_asked(gm)
    centered_transforms_as_modulations(gm)
    return mutated


def real_graph(gm: fx.GraphModule, complex_inputs: frozenset[fx.Node], *, cpu_vector_bytes: int | None,
               pair_products: bool, gemm_multiplications: int, complex_autocast: bool, fusion_barriers: bool) -> None:
    """Stage 2, on the real graph planarize made (every front end), in this order:

    - complex products along a dim (``realify::complex_prod``, the prod rule's) as real ops,
      in eager's CPU order for vectors of ``cpu_vector_bytes`` bytes (the compile backend on a
      CPU), in the device-neutral order where it is None (every other front end and target;
      realify/passes/product_order.py); first, so that the passes below see the real ops;
    - (re, im) pairs kept where values sit interleaved, in control flow's bodies too
      (realify/passes/layout.py); with ``pair_products``, products on such values as
      ``realify::cmul_pairs``; each complex mm/bmm in the form the compile backend picks
      (``realify.config.gemm_form``, which it sets around its trace:
      realify/passes/gemm_form.py), where it picks one, else small ones on the pairs
      (``realify::cmm_pairs``, with ``pair_products``) and the rest planar;
    - with ``gemm_multiplications == 3``, complex matrix products by Gauss's three real
      products (realify/passes/gauss.py);
    - with ``complex_autocast``, the real products of complex products traced under autocast
      on autocast's dtype (realify/passes/autocast.py);
    - without ``fusion_barriers`` (any consumer but the compile backend's Inductor),
      ``realify::fusion_barrier`` removed;
    - ``realify::stop_gradient`` as ``aten.detach``;
    - reshapes to symbolic sizes with literal 1s as reshapes and unsqueezes, whose strides
      torch.export's trace guards on no comparison (realify/passes/unit_dims.py).
    """
    expand_complex_products(gm, cpu_vector_bytes)
    if gemm_form.current() == "4m":
        gemm_multiplications = 4  # forced: every complex GEMM and convolution in four products
    for graph in _graphs(gm):
        place_pairs(graph, products=pair_products, boundary=complex_inputs, gemm_multiplications=gemm_multiplications)
    if gemm_multiplications == 3:
        gauss_products(gm)
    if complex_autocast:
        lower_precision_products(gm)
    if not fusion_barriers:
        strip_fusion_barriers(gm)
    stop_gradients_as_detach(gm)
    for graph in _graphs(gm):
        unit_dims_as_unsqueezes(graph)


def _graphs(gm: fx.GraphModule) -> list[fx.GraphModule]:
    """``gm`` and the graphs of its control flow's branches and bodies."""
    return [module for module in gm.modules() if isinstance(module, fx.GraphModule)]


def compile_backend_real_graph(gm: fx.GraphModule, layouts: Sequence[str], *, inductor: bool, differentiable: bool,
                               shared_inputs: frozenset[int]) -> None:
    """Stage 3, the compile backend's real graph before its inner compiler, in this order:

    - inverse FFTs of a band-limited spectrum transform the band only (realify/passes/fft_bands.py);
    - writes to inputs (realify/passes/input_writes.py): under Inductor without gradients, the
      graph writes the caller's memory itself (not the inputs in ``shared_inputs``, which
      share memory with another); otherwise only the written region comes back, and, where
      the graph is ``differentiable``, each written input is read once.
    """
    transform_only_bands(gm)
    if inductor and not differentiable:
        write_inputs_in_place(gm, layouts, shared_inputs)
    else:
        return_written_regions(gm, layouts)
        if differentiable:
            read_written_inputs_once(gm)


def inductor_joint_graph_passes() -> tuple[Any, ...]:
    """Stage 4a, Inductor's joint-graph passes, before AOTAutograd splits forward and backward:
    band-only inverse FFTs again, where the gradient of a one-sided FFT whose modes were cut is
    a ``c2r`` of a band (realify/passes/inductor_joint_graph.py)."""
    from .inductor_joint_graph import TransformOnlyBands

    return (TransformOnlyBands(),)


def inductor_post_grad_passes(*cache_keys: Any) -> tuple[Any, ...]:
    """Stage 4b, Inductor's post-grad passes, on the forward and the backward graph, in this
    order: ``realify::cmul_pairs``/``cmm_pairs`` as ATen's complex kernels
    (realify/passes/pair_products_to_aten.py), GEMM operands laid out for BLAS
    (realify/passes/gemm_operands.py), then ``cache_keys``: passes that rewrite nothing, whose
    ``uuid`` keys Inductor's caches on what the graph's code generation depends on beyond the
    graph (realify/inductor.py)."""
    from .gemm_operands import GemmOperandsForBLAS
    from .pair_products_to_aten import PairProductsToATen

    return (PairProductsToATen(), GemmOperandsForBLAS(), *cache_keys)
