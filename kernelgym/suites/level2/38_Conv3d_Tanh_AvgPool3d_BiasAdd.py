import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Same-padded 3x3x3 volumetric convolution, tanh, 2x2x2 average pooling, then a learned channel bias."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, 3, padding=1)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1, 1) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.avg_pool3d(torch.tanh(self.conv(x)), 2) + self.bias


batch_size = 16
in_channels = 16
out_channels = 32
depth = 32
height = 64
width = 64


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "conv_chain",
    "sizes": {"cpu": {"batch_size": 2, "in_channels": 4, "out_channels": 8, "depth": 8, "height": 16, "width": 16}},
    "shapes": {"cpu": {"batch_size": [1, 2]}, "gpu": {"batch_size": [4, 16]}},
}
