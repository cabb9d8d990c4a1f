import torch
import torch.nn as nn


class Model(nn.Module):
    """Product of two square matrices: C = A @ B."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


n = 4096


def get_inputs():
    # A is scaled by 1/sqrt(n), so outputs are O(1) and the rounding of an n-term fp32 dot product (in any
    # summation order) stays well inside the 1e-4 tolerance, also for rescaled inputs.
    return [torch.randn(n, n) / n**0.5, torch.randn(n, n)]


def get_init_inputs():
    return []


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "matmul",
    "sizes": {"cpu": {"n": 256}},
    "shapes": {"cpu": {"n": [64, 256]}, "gpu": {"n": [1024, 4096]}},
}
