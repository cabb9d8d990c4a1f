import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """ViT front end and one encoder block.

    Non-overlapping patches are embedded by a strided convolution, a learned class token is prepended and a
    learned position embedding added; one pre-norm transformer block and a final LayerNorm follow. Returns
    the normalised token sequence, class token first.
    """

    def __init__(self, in_channels: int, image_size: int, patch_size: int, embed_dim: int, num_heads: int,
                 mlp_dim: int):
        super().__init__()
        num_patches = (image_size // patch_size) ** 2
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.patch_embed = nn.Conv2d(in_channels, embed_dim, patch_size, stride=patch_size)
        self.cls_token = nn.Parameter(torch.randn(1, 1, embed_dim) * 0.02)
        self.pos_embed = nn.Parameter(torch.randn(1, num_patches + 1, embed_dim) * 0.02)
        self.norm1 = nn.LayerNorm(embed_dim)
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        self.norm2 = nn.LayerNorm(embed_dim)
        self.fc1 = nn.Linear(embed_dim, mlp_dim)
        self.fc2 = nn.Linear(mlp_dim, embed_dim)
        self.norm_out = nn.LayerNorm(embed_dim)

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        b, s, e = x.shape
        qkv = self.qkv(x).view(b, s, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        out = torch.matmul(torch.softmax(scores, dim=-1), v)
        return self.out_proj(out.transpose(1, 2).reshape(b, s, e))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(images).flatten(2).transpose(1, 2)  # (b, patches, embed_dim)
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        x = torch.cat([cls, x], dim=1) + self.pos_embed
        x = x + self.attention(self.norm1(x))
        x = x + self.fc2(F.gelu(self.fc1(self.norm2(x))))
        return self.norm_out(x)


batch_size = 32
in_channels = 3
image_size = 224
patch_size = 16
embed_dim = 768
num_heads = 12
mlp_dim = 3072


def get_inputs():
    return [torch.randn(batch_size, in_channels, image_size, image_size)]


def get_init_inputs():
    return [in_channels, image_size, patch_size, embed_dim, num_heads, mlp_dim]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "architecture",
    "sizes": {
        "cpu": {
            "batch_size": 4, "image_size": 64, "patch_size": 8,
            "embed_dim": 128, "num_heads": 4, "mlp_dim": 512,
        }
    },
    "shapes": {"cpu": {"batch_size": [1, 4]}, "gpu": {"batch_size": [8, 32]}},
}
