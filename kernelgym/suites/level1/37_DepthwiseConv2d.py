import torch
import torch.nn as nn


class Model(nn.Module):
    """Depthwise 2D convolution: one kernel per channel (groups == channels), 'same' padding, with bias."""

    def __init__(self, channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size, padding=kernel_size // 2, groups=channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


batch_size = 16
channels = 96
height = 256
width = 256
kernel_size = 5


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels, kernel_size]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "convolution",
    "sizes": {"cpu": {"batch_size": 4, "channels": 16, "height": 48, "width": 48}},
    "shapes": {"cpu": {"batch_size": [1, 4]}, "gpu": {"batch_size": [4, 16]}},
}
