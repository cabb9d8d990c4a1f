import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Same-padded 5x5 convolution, Mish, then clamping to [min_value, max_value]."""

    def __init__(self, in_channels: int, out_channels: int, min_value: float, max_value: float):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 5, padding=2)
        self.min_value = min_value
        self.max_value = max_value

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp(F.mish(self.conv(x)), self.min_value, self.max_value)


batch_size = 64
in_channels = 16
out_channels = 32
height = 128
width = 128
min_value = -0.2
max_value = 0.6


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, min_value, max_value]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "conv_chain",
    "sizes": {"cpu": {"batch_size": 2, "in_channels": 4, "out_channels": 8, "height": 32, "width": 32}},
    "shapes": {"cpu": {"batch_size": [1, 2]}, "gpu": {"batch_size": [16, 64]}},
}
