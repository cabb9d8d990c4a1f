import torch
import torch.nn as nn


class Model(nn.Module):
    """Transposed 2D convolution that doubles the spatial size (kernel 4, stride 2, padding 1)."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.deconv = nn.ConvTranspose2d(in_channels, out_channels, kernel_size=4, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.deconv(x)


batch_size = 32
in_channels = 64
out_channels = 32
height = 128
width = 128


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "convolution",
    "sizes": {"cpu": {"batch_size": 2, "in_channels": 16, "out_channels": 8, "height": 24, "width": 24}},
    "shapes": {"cpu": {"batch_size": [1, 2]}, "gpu": {"batch_size": [8, 32]}},
}
