import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Elementwise leaky ReLU: x where x > 0, negative_slope * x elsewhere."""

    def __init__(self, negative_slope: float):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(x, negative_slope=self.negative_slope)


batch_size = 8192
dim = 12288
negative_slope = 0.05


def get_inputs():
    return [torch.rand(batch_size, dim) * 2 - 1]


def get_init_inputs():
    return [negative_slope]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "activation",
    "sizes": {"cpu": {"batch_size": 128, "dim": 2048}},
    "shapes": {"cpu": {"batch_size": [32, 128]}, "gpu": {"batch_size": [2048, 8192]}},
}
