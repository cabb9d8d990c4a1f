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
    # Scaled by 1/sqrt(length) so that the running sums stay O(1): fp32 rounding along a whole row (in any
    # scan order) then stays well inside the 1e-4 tolerance, also where a suffix sum passes close to zero.
    return [torch.randn(batch_size, length) / length**0.5]


def get_init_inputs():
    return [1]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "scan",
    "sizes": {"cpu": {"batch_size": 64, "length": 4096}},
    "shapes": {"cpu": {"batch_size": [16, 64]}, "gpu": {"batch_size": [4096, 16384]}},
}
