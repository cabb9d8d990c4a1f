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
    return [torch.randn(k, m), torch.randn(k, n)]


def get_init_inputs():
    return []


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {"category": "matmul", "sizes": {"cpu": {"m": 256, "k": 320, "n": 192}}}
