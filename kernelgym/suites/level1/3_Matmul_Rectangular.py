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
    return [torch.randn(m, k), torch.randn(k, n)]


def get_init_inputs():
    return []


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {"category": "matmul", "sizes": {"cpu": {"m": 384, "k": 160, "n": 224}}}
