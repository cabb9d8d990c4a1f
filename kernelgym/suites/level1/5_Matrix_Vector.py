import torch
import torch.nn as nn


class Model(nn.Module):
    """Matrix times a column vector: (m, k) @ (k, 1) -> (m, 1). Bound by reading the matrix once."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, x)


m = 8192
k = 12288


def get_inputs():
    # A is scaled by 1/sqrt(k), so outputs are O(1) and the rounding of a k-term fp32 dot product (in any
    # summation order) stays well inside the 1e-4 tolerance, also for rescaled inputs.
    return [torch.randn(m, k) / k**0.5, torch.randn(k, 1)]


def get_init_inputs():
    return []


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "matmul",
    "sizes": {"cpu": {"m": 512, "k": 2048}},
    "shapes": {"cpu": {"m": [128, 512], "k": [512, 2048]}, "gpu": {"m": [2048, 8192], "k": [3072, 12288]}},
}
