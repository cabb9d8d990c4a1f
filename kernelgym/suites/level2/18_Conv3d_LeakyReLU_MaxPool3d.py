import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """3x3x3 volumetric convolution, leaky ReLU, then 2x2x2 max pooling."""

    def __init__(self, in_channels: int, out_channels: int, negative_slope: float):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, 3)
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.leaky_relu(self.conv(x), self.negative_slope)
        return F.max_pool3d(x, 2)


batch_size = 16
in_channels = 16
out_channels = 32
depth = 32
height = 64
width = 64
negative_slope = 0.05


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, negative_slope]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "conv_chain",
    "sizes": {"cpu": {"batch_size": 2, "in_channels": 3, "out_channels": 8, "depth": 8, "height": 16, "width": 16}},
    "shapes": {"cpu": {"batch_size": [1, 2]}, "gpu": {"batch_size": [4, 16]}},
}
