import torch
import torch.nn as nn


class Model(nn.Module):
    """3x3 convolution, ReLU, then a learned per-channel bias added after the activation."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x)) + self.bias


batch_size = 64
in_channels = 32
out_channels = 64
height = 128
width = 128
kernel_size = 3


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "conv_chain",
    "sizes": {"cpu": {"batch_size": 2, "in_channels": 8, "out_channels": 16, "height": 32, "width": 32}},
    "shapes": {"cpu": {"batch_size": [1, 2]}, "gpu": {"batch_size": [16, 64]}},
}
