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
    return [torch.randn(batch_size, m, k), torch.randn(batch_size, k, n)]


def get_init_inputs():
    return []


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {"category": "matmul", "sizes": {"cpu": {"batch_size": 8, "m": 96, "k": 128, "n": 80}}}
