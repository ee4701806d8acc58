"""A complex op realify has no rule for, as the tests' example of an eager island.

``phase_twist(z) = z * exp(i |z|)`` is a ``torch.library`` custom op on complex tensors, as
a user's own C++/CUDA kernel wrapped with torch.library would be: realify cannot know what it
computes, so no planar rule will ever cover it. Under the compile backend it runs as an eager
island (with the warning), strict mode and ``realify.decompose`` raise ``MissingRuleError``,
``realify.export`` refuses it, and the eager ``ComplexTensor`` raises. An aten op that lacks a
rule today would stop being an island the day it gets one; this op keeps the tests about
islands testing islands.

It has what a well-wrapped kernel has: a fake implementation (dynamo, AOTAutograd and
dynamic shapes trace through it) and an autograd formula, so the island's gradient can be
compared with eager's. Importing this module registers the op, once per process.
"""

from __future__ import annotations

import torch

# The op's name as realify prints it: warnings, MissingRuleError.op, islands_in(gm), explain().
PHASE_TWIST = "realify_tests.phase_twist.default"


def _twist(z: torch.Tensor) -> torch.Tensor:
    # Not holomorphic (|z| is not): its gradient mixes the real and imaginary parts, so a
    # dropped conjugation or a swapped part in an island's backward shows.
    return z * torch.exp(1j * z.abs())


@torch.library.custom_op("realify_tests::phase_twist", mutates_args=())
def phase_twist(z: torch.Tensor) -> torch.Tensor:
    """``z * exp(i |z|)``: rotates each element by its own modulus."""
    return _twist(z)


@phase_twist.register_fake
def _(z):
    return torch.empty_like(z)


def _setup_context(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _backward(ctx, grad):
    # The kernel's own expression differentiated by autograd, so the formula is eager's
    # gradient by construction. Autograd is off in a backward that builds no graph, hence
    # enable_grad.
    (z,) = ctx.saved_tensors
    with torch.enable_grad():
        z = z.detach().requires_grad_()
        (dz,) = torch.autograd.grad(_twist(z), z, grad)
    return dz


phase_twist.register_autograd(_backward, setup_context=_setup_context)
