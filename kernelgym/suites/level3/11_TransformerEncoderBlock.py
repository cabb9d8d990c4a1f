import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Pre-norm transformer encoder block, written out with linear layers.

    x = x + OutProj(MultiHeadSelfAttention(LayerNorm(x)))
    x = x + FC2(GELU(FC1(LayerNorm(x))))
    """

    def __init__(self, embed_dim: int, num_heads: int, mlp_dim: int):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.norm1 = nn.LayerNorm(embed_dim)
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        self.norm2 = nn.LayerNorm(embed_dim)
        self.fc1 = nn.Linear(embed_dim, mlp_dim)
        self.fc2 = nn.Linear(mlp_dim, embed_dim)

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        b, s, e = x.shape
        qkv = self.qkv(x).view(b, s, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        out = torch.matmul(torch.softmax(scores, dim=-1), v)
        return self.out_proj(out.transpose(1, 2).reshape(b, s, e))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.norm1(x))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


batch_size = 16
seq_len = 512
embed_dim = 768
num_heads = 12
mlp_dim = 3072


def get_inputs():
    return [torch.randn(batch_size, seq_len, embed_dim)]


def get_init_inputs():
    return [embed_dim, num_heads, mlp_dim]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "architecture",
    "sizes": {"cpu": {"batch_size": 2, "seq_len": 128, "embed_dim": 128, "num_heads": 4, "mlp_dim": 512}},
    "shapes": {"cpu": {"batch_size": [1, 2]}, "gpu": {"batch_size": [4, 16]}},
}
