"""A rotary-embedding attention block in ONNX Runtime

Rotary position embeddings (as in LLaMA) rotate query and key pairs by complex
multiplication: ``view_as_complex(q) * freqs_cis``. ONNX has no complex type, so
``torch.onnx`` cannot export that product. ``realify.export`` turns the block into a real-only
``ExportedProgram`` and ``realify.onnx.to_onnx`` writes it as an ONNX model, which ONNX Runtime
runs; the script compares its output with eager PyTorch's, position by position.
"""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import onnxruntime
import torch

import realify
from realify.onnx import to_onnx

DIM, HEADS, SEQ, BATCH = 64, 4, 32, 2


def rotary_frequencies(head_dim: int, seq: int, theta: float = 10000.0) -> torch.Tensor:
    """``exp(i m theta_k)`` for position ``m`` and frequency ``theta_k``: (seq, head_dim / 2)."""
    inverse = 1.0 / theta ** (torch.arange(0, head_dim, 2).float() / head_dim)
    angles = torch.outer(torch.arange(seq).float(), inverse)
    return torch.polar(torch.ones_like(angles), angles)


class RotaryAttention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(DIM, 3 * DIM, bias=False)
        self.out = torch.nn.Linear(DIM, DIM, bias=False)
        self.register_buffer("freqs_cis", rotary_frequencies(DIM // HEADS, SEQ))  # a complex buffer

    def rotate(self, x):  # x: (batch, seq, heads, head_dim), real
        pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        rotated = pairs * self.freqs_cis[: x.shape[1], None, :]
        return torch.view_as_real(rotated).flatten(-2)

    def forward(self, x):  # x: (batch, seq, DIM)
        batch, seq, _ = x.shape
        q, k, v = self.qkv(x).view(batch, seq, 3, HEADS, DIM // HEADS).unbind(2)
        q, k = self.rotate(q), self.rotate(k)
        attention = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        return self.out(attention.transpose(1, 2).reshape(batch, seq, DIM))


torch.manual_seed(0)
block = RotaryAttention().eval()
x = torch.randn(BATCH, SEQ, DIM)

program = realify.export(block, (x,))
complex_values = [node for node in program.graph.nodes
                  if getattr(node.meta.get("val"), "is_complex", lambda: False)()]
print(f"exported graph: {len(program.graph.nodes)} nodes, {len(complex_values)} with a complex dtype")

to_onnx(program, path="rotary_attention.onnx")
session = onnxruntime.InferenceSession("rotary_attention.onnx", providers=["CPUExecutionProvider"])
(onnx_out,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
onnx_out = torch.from_numpy(onnx_out)

with torch.no_grad():
    eager_out = block(x)
error = (onnx_out - eager_out).abs()
print(f"ONNX Runtime against eager: max abs error {error.max().item():.2e}, "
      f"max relative to the largest output {error.max().item() / eager_out.abs().max().item():.2e}")

figure, (scatter, per_position) = plt.subplots(1, 2, figsize=(10, 3.6))
scatter.scatter(eager_out.flatten(), onnx_out.flatten(), s=2)
scatter.set_xlabel("eager PyTorch")
scatter.set_ylabel("ONNX Runtime")
scatter.set_title(f"{eager_out.numel()} outputs")
per_position.semilogy(error.amax(dim=(0, 2)).clamp_min(1e-12), marker="o", markersize=3)
per_position.set_xlabel("sequence position")
per_position.set_ylabel("max |ONNX - eager|")
per_position.set_title("error per position")
figure.tight_layout()
figure.savefig("rotary_onnx.png", dpi=110)
