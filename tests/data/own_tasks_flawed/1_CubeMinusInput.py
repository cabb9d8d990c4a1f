import torch
from torch import nn


class Model(nn.Module):
    """x**3 - x, elementwise."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * x * x - x


size = 1048576


def get_inputs():
    return [torch.randn(size)]


def get_init_inputs():
    return []


KERNELGYM = {"category": "elementwise", "sizes": {"cpu": {"size": 16384}}}
