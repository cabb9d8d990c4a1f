import torch
import torch.nn as nn


class Model(nn.Module):
    """Mean over the last dimension of a (batch, dim1, dim2) tensor."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mean(x, dim=self.dim)


batch_size = 256
dim1 = 384
dim2 = 1024


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return [-1]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "reduction",
    "sizes": {"cpu": {"batch_size": 32, "dim1": 128, "dim2": 256}},
    "shapes": {"cpu": {"batch_size": [8, 32]}, "gpu": {"batch_size": [64, 256]}},
}
