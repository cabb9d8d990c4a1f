import torch
import torch.nn as nn


class Model(nn.Module):
    """Maximum over the middle dimension of a (batch, dim1, dim2) tensor (values only)."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.amax(x, dim=self.dim)


batch_size = 96
dim1 = 1024
dim2 = 1024


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return [1]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "reduction",
    "sizes": {"cpu": {"batch_size": 16, "dim1": 256, "dim2": 256}},
    "shapes": {"cpu": {"batch_size": [4, 16]}, "gpu": {"batch_size": [24, 96]}},
}
