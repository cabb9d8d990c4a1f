import torch
import torch.nn as nn


class Model(nn.Module):
    """Sum over the middle dimension of a (batch, dim1, dim2) tensor, keeping it as size 1."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim, keepdim=True)


batch_size = 128
dim1 = 1024
dim2 = 768


def get_inputs():
    # Scaled by 1/sqrt(dim1) so that sums are O(1): the rounding of a dim1-term fp32 sum (in any order) then
    # stays well inside the 1e-4 tolerance, also for rescaled inputs.
    return [(torch.rand(batch_size, dim1, dim2) * 2 - 1) / dim1**0.5]


def get_init_inputs():
    return [1]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "reduction",
    "sizes": {"cpu": {"batch_size": 16, "dim1": 512, "dim2": 128}},
    "shapes": {"cpu": {"batch_size": [4, 16]}, "gpu": {"batch_size": [32, 128]}},
}
