import torch
import torch.nn as nn


class Model(nn.Module):
    """RMS normalization over the last dimension with a learned scale. Forward and backward are judged: the
    gradients of x and weight for an upstream gradient."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


batch_size = 4096
dim = 8192
eps = 1e-06


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim, eps]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above; held-out
# shapes are drawn within the limits of "shapes".
KERNELGYM = {
    "category": "normalization",
    "backward": True,
    "sizes": {"cpu": {"batch_size": 64, "dim": 2048}},
    "shapes": {"cpu": {"batch_size": [8, 128], "dim": [100, 4096]},
               "gpu": {"batch_size": [512, 8192], "dim": [1000, 16384]}},
}
