import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """3x3 convolution, 2x2 max pooling, then hard-swish."""

    def __init__(self, in_channels: int, out_channels: int, pool_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3)
        self.pool_size = pool_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(self.conv(x), self.pool_size)
        return F.hardswish(x)


batch_size = 128
in_channels = 16
out_channels = 32
height = 128
width = 128
pool_size = 2


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, pool_size]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "conv_chain",
    "sizes": {"cpu": {"batch_size": 4, "in_channels": 3, "out_channels": 16, "height": 32, "width": 32}},
    "shapes": {"cpu": {"batch_size": [1, 4]}, "gpu": {"batch_size": [32, 128]}},
}
