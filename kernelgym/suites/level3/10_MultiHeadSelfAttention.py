import math

import torch
import torch.nn as nn


class Model(nn.Module):
    """Multi-head self-attention written out with linear layers.

    One fused projection produces queries, keys and values; each head computes softmax(q k^T / sqrt(d)) v
    over the whole sequence; the heads are concatenated and passed through an output projection.
    """

    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, e = x.shape
        qkv = self.qkv(x).view(b, s, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]  # each (b, heads, s, head_dim)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        attn = torch.softmax(scores, dim=-1)
        out = torch.matmul(attn, v).transpose(1, 2).reshape(b, s, e)
        return self.out_proj(out)


batch_size = 16
seq_len = 512
embed_dim = 768
num_heads = 12


def get_inputs():
    return [torch.randn(batch_size, seq_len, embed_dim)]


def get_init_inputs():
    return [embed_dim, num_heads]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "attention",
    "sizes": {"cpu": {"batch_size": 2, "seq_len": 128, "embed_dim": 256, "num_heads": 8}},
    "shapes": {"cpu": {"batch_size": [1, 2]}, "gpu": {"batch_size": [4, 16]}},
}
