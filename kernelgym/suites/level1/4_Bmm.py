import torch
import torch.nn as nn


class Model(nn.Module):
    """Batched matrix product: one independent (m, k) @ (k, n) product per batch entry."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.bmm(a, b)


batch_size = 128
m = 512
k = 1024
n = 384


def get_inputs():
    # A is scaled by 1/sqrt(k), so outputs are O(1) and the rounding of a k-term fp32 dot product (in any
    # summation order) stays well inside the 1e-4 tolerance, also for rescaled inputs.
    return [torch.randn(batch_size, m, k) / k**0.5, torch.randn(batch_size, k, n)]


def get_init_inputs():
    return []


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "matmul",
    "sizes": {"cpu": {"batch_size": 8, "m": 96, "k": 128, "n": 80}},
    "shapes": {"cpu": {"batch_size": [2, 8]}, "gpu": {"batch_size": [32, 128]}},
}
