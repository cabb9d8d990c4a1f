import torch
import torch.nn as nn


class Model(nn.Module):
    """3D convolution over a (batch, channels, depth, height, width) volume, cubic kernel, 'same' padding."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


batch_size = 8
in_channels = 32
out_channels = 32
depth = 32
height = 64
width = 64
kernel_size = 3


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "convolution",
    "sizes": {
        "cpu": {"batch_size": 2, "in_channels": 4, "out_channels": 8, "depth": 8, "height": 16, "width": 16}
    },
    "shapes": {"cpu": {"batch_size": [1, 2]}, "gpu": {"batch_size": [2, 8]}},
}
