import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Per-feature scale and shift, then SiLU. Forward and backward are judged: the gradients of x, weight and
    bias for an upstream gradient."""

    def __init__(self, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(dim))
        self.bias = nn.Parameter(torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(x * self.weight + self.bias)


batch_size = 4096
dim = 8192


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above; held-out
# shapes are drawn within the limits of "shapes".
KERNELGYM = {
    "category": "elementwise",
    "backward": True,
    "sizes": {"cpu": {"batch_size": 64, "dim": 2048}},
    "shapes": {"cpu": {"batch_size": [8, 128], "dim": [100, 4096]},
               "gpu": {"batch_size": [512, 8192], "dim": [1000, 16384]}},
}
