import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Multi-head scaled dot-product attention without a mask: softmax(q k^T / sqrt(head_dim)) v per head."""

    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v)


batch_size = 8
num_heads = 16
seq_len = 2048
head_dim = 64


def get_inputs():
    shape = (batch_size, num_heads, seq_len, head_dim)
    return [torch.randn(shape), torch.randn(shape), torch.randn(shape)]


def get_init_inputs():
    return []


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
# Attention logits grow with the square of the input scale: a rescaled draw makes the softmax so peaked that
# fp32 rounding alone exceeds the tolerance, so correctness trials keep the task's own inputs.
KERNELGYM = {
    "category": "attention",
    "sizes": {"cpu": {"batch_size": 2, "num_heads": 4, "seq_len": 128, "head_dim": 32}},
    "perturb": "none",
    "shapes": {"cpu": {"batch_size": [1, 2]}, "gpu": {"batch_size": [2, 8]}},
}
