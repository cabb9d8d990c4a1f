import torch
import torch.nn as nn


class Model(nn.Module):
    """Depthwise-separable convolution: a per-channel 3x3 convolution, a 1x1 channel mix, then ReLU."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.depthwise = nn.Conv2d(in_channels, in_channels, 3, padding=1, groups=in_channels)
        self.pointwise = nn.Conv2d(in_channels, out_channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.pointwise(self.depthwise(x)))


batch_size = 64
in_channels = 32
out_channels = 64
height = 128
width = 128


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "conv_chain",
    "sizes": {"cpu": {"batch_size": 2, "in_channels": 16, "out_channels": 32, "height": 32, "width": 32}},
    "shapes": {"cpu": {"batch_size": [1, 2]}, "gpu": {"batch_size": [16, 64]}},
}
