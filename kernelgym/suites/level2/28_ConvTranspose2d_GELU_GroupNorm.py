import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Upsampling 3x3 transposed convolution (stride 2), GELU, then group normalization."""

    def __init__(self, in_channels: int, out_channels: int, num_groups: int):
        super().__init__()
        self.deconv = nn.ConvTranspose2d(in_channels, out_channels, 3, stride=2, padding=1, output_padding=1)
        self.norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(F.gelu(self.deconv(x)))


batch_size = 64
in_channels = 64
out_channels = 32
num_groups = 8
height = 64
width = 64


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, num_groups]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "conv_chain",
    "sizes": {"cpu": {"batch_size": 2, "in_channels": 16, "out_channels": 8, "num_groups": 4, "height": 16, "width": 16}},
    "shapes": {"cpu": {"batch_size": [1, 2]}, "gpu": {"batch_size": [16, 64]}},
}
