import torch
import torch.nn as nn


class Model(nn.Module):
    """C = A^T @ B, with A stored as (k, m): the left operand is read through a transposed view."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a.t(), b)


m = 4096
k = 8192
n = 2048


def get_inputs():
    # A is scaled by 1/sqrt(k), so outputs are O(1) and the rounding of a k-term fp32 dot product (in any
    # summation order) stays well inside the 1e-4 tolerance, also for rescaled inputs.
    return [torch.randn(k, m) / k**0.5, torch.randn(k, n)]


def get_init_inputs():
    return []


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "matmul",
    "sizes": {"cpu": {"m": 256, "k": 320, "n": 192}},
    "shapes": {"cpu": {"m": [64, 256], "k": [80, 320], "n": [48, 192]}, "gpu": {"m": [1024, 4096], "k": [2048, 8192], "n": [512, 2048]}},
}
