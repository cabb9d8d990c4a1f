import torch
import torch.nn as nn


class Model(nn.Module):
    """Instance normalization (no affine, no running statistics): each (sample, channel) plane on its own."""

    def __init__(self, channels: int):
        super().__init__()
        self.norm = nn.InstanceNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


batch_size = 32
channels = 48
height = 256
width = 256


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "norm",
    "sizes": {"cpu": {"batch_size": 4, "channels": 8, "height": 64, "width": 128}},
    "shapes": {"cpu": {"batch_size": [1, 4]}, "gpu": {"batch_size": [8, 32]}},
}
