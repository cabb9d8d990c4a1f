import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Downsampling 3x3 convolution (stride 2), SiLU, then group normalization."""

    def __init__(self, in_channels: int, out_channels: int, num_groups: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, stride=2, padding=1)
        self.norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(F.silu(self.conv(x)))


batch_size = 128
in_channels = 32
out_channels = 128
num_groups = 16
height = 128
width = 128


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, num_groups]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "conv_chain",
    "sizes": {"cpu": {"batch_size": 4, "in_channels": 4, "out_channels": 16, "num_groups": 4, "height": 32, "width": 32}},
    "shapes": {"cpu": {"batch_size": [1, 4]}, "gpu": {"batch_size": [32, 128]}},
}
