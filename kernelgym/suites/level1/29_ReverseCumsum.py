import torch
import torch.nn as nn


class Model(nn.Module):
    """Suffix sum along each row: out[i] = x[i] + x[i + 1] + ... + x[n - 1] (a cumsum run from the end)."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x.flip(self.dim), dim=self.dim).flip(self.dim)


batch_size = 16384
length = 6144


def get_inputs():
    return [torch.randn(batch_size, length)]


def get_init_inputs():
    return [1]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {"category": "scan", "sizes": {"cpu": {"batch_size": 64, "length": 4096}}}
