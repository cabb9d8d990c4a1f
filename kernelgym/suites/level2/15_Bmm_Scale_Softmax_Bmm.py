import torch
import torch.nn as nn


class Model(nn.Module):
    """Scaled dot-product attention written out: q k^T / sqrt(d), softmax over keys, weighted sum of values."""

    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        scores = torch.bmm(q, k.transpose(1, 2)) * (q.shape[-1] ** -0.5)
        return torch.bmm(torch.softmax(scores, dim=-1), v)


batch_size = 64
seq_len = 1024
head_dim = 128


def get_inputs():
    q = torch.randn(batch_size, seq_len, head_dim)
    k = torch.randn(batch_size, seq_len, head_dim)
    v = torch.randn(batch_size, seq_len, head_dim)
    return [q, k, v]


def get_init_inputs():
    return []


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
# Attention logits grow with the square of the input scale, and a rescaled/shifted draw makes the softmax so
# peaked that plain fp32 rounding exceeds the 1e-4 tolerance; correctness trials keep the task's own inputs.
KERNELGYM = {
    "category": "gemm_chain",
    "sizes": {"cpu": {"batch_size": 4, "seq_len": 128, "head_dim": 64}},
    "perturb": "none",
    "shapes": {"cpu": {"batch_size": [1, 4]}, "gpu": {"batch_size": [16, 64]}},
}
