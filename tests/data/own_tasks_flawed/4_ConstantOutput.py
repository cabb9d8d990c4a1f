import torch
from torch import nn


class Model(nn.Module):
    """Whatever the input, ones: an answer that ignores the input would pass."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ones_like(x) + 0 * x.sum()


size = 65536


def get_inputs():
    return [torch.randn(size)]


def get_init_inputs():
    return []


KERNELGYM = {"category": "elementwise", "sizes": {"cpu": {"size": 4096}}}
