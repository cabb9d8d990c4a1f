import torch
import torch.nn as nn


class Model(nn.Module):
    """Group normalization of an image batch: statistics over each group of channels and all pixels."""

    def __init__(self, num_groups: int, channels: int):
        super().__init__()
        self.norm = nn.GroupNorm(num_groups, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


batch_size = 32
channels = 64
num_groups = 8
height = 224
width = 224


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [num_groups, channels]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "norm",
    "sizes": {"cpu": {"batch_size": 4, "channels": 16, "num_groups": 4, "height": 64, "width": 64}},
    "shapes": {"cpu": {"batch_size": [1, 4]}, "gpu": {"batch_size": [8, 32]}},
}
