import torch
import torch.nn as nn


class Model(nn.Module):
    """RMS normalization over the last dimension: x / sqrt(mean(x^2) + eps) * weight (no mean subtraction)."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return x * rms * self.weight


batch_size = 8192
dim = 12288
eps = 1e-6


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim, eps]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "norm",
    "sizes": {"cpu": {"batch_size": 128, "dim": 2048}},
    "shapes": {"cpu": {"batch_size": [32, 128]}, "gpu": {"batch_size": [2048, 8192]}},
}
