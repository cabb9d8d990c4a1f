import torch
import torch.nn as nn


class Model(nn.Module):
    """Product of rectangular matrices of unequal sides: (m, k) @ (k, n) -> (m, n)."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


m = 6144
k = 1536
n = 8192


def get_inputs():
    # A is scaled by 1/sqrt(k), so outputs are O(1) and the rounding of a k-term fp32 dot product (in any
    # summation order) stays well inside the 1e-4 tolerance, also for rescaled inputs.
    return [torch.randn(m, k) / k**0.5, torch.randn(k, n)]


def get_init_inputs():
    return []


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "matmul",
    "sizes": {"cpu": {"m": 384, "k": 160, "n": 224}},
    "shapes": {"cpu": {"m": [96, 384], "k": [40, 160], "n": [56, 224]}, "gpu": {"m": [1536, 6144], "k": [384, 1536], "n": [2048, 8192]}},
}
