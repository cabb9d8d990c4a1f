import torch
from torch import nn


class Model(nn.Module):
    """A projection whose weight has the wrong shape for its inputs: the reference itself fails."""

    def __init__(self, features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features + 1, features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.weight


batch = 256
features = 512


def get_inputs():
    return [torch.randn(batch, features)]


def get_init_inputs():
    return [features]


KERNELGYM = {"category": "gemm", "sizes": {"cpu": {"batch": 16, "features": 64}}}
