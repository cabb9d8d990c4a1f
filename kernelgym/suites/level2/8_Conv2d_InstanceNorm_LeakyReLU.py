import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """3x3 convolution, instance normalization (no affine, no running stats), then leaky ReLU."""

    def __init__(self, in_channels: int, out_channels: int, negative_slope: float):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3)
        self.norm = nn.InstanceNorm2d(out_channels)
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(self.norm(self.conv(x)), self.negative_slope)


batch_size = 64
in_channels = 32
out_channels = 32
height = 128
width = 128
negative_slope = 0.1


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, negative_slope]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "conv_chain",
    "sizes": {"cpu": {"batch_size": 2, "in_channels": 8, "out_channels": 8, "height": 32, "width": 32}},
    "shapes": {"cpu": {"batch_size": [1, 2]}, "gpu": {"batch_size": [16, 64]}},
}
