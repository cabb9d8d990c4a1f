import torch
import torch.nn as nn


class Model(nn.Module):
    """U-Net decoder step: 2x2 stride-2 transposed convolution, add the skip connection, then ReLU."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.up = nn.ConvTranspose2d(in_channels, out_channels, 2, stride=2)

    def forward(self, x: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.up(x) + skip)


batch_size = 64
in_channels = 128
out_channels = 64
height = 64
width = 64


def get_inputs():
    x = torch.randn(batch_size, in_channels, height, width)
    skip = torch.randn(batch_size, out_channels, 2 * height, 2 * width)
    return [x, skip]


def get_init_inputs():
    return [in_channels, out_channels]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "conv_chain",
    "sizes": {"cpu": {"batch_size": 2, "in_channels": 16, "out_channels": 8, "height": 16, "width": 16}},
    "shapes": {"cpu": {"batch_size": [1, 2]}, "gpu": {"batch_size": [16, 64]}},
}
