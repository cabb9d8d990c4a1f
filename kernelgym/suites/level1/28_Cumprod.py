import torch
import torch.nn as nn


class Model(nn.Module):
    """Inclusive prefix product along each row of a (batch, length) tensor."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumprod(x, dim=self.dim)


batch_size = 16384
length = 6144


def get_inputs():
    # Factors within 1% of 1 (geometric mean close to 1): the running products stay O(1) over a whole row.
    return [1 + 0.01 * (torch.rand(batch_size, length) * 2 - 1)]


def get_init_inputs():
    return [1]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
# A rescaled draw would push the products to 0 or inf, so correctness trials keep the task's own inputs.
KERNELGYM = {
    "category": "scan",
    "sizes": {"cpu": {"batch_size": 64, "length": 4096}},
    "perturb": "none",
    "shapes": {"cpu": {"batch_size": [16, 64]}, "gpu": {"batch_size": [4096, 16384]}},
}
