import torch
import torch.nn as nn


class Model(nn.Module):
    """Stride-2 transposed convolution (doubles height and width), an extra learned bias, then tanh."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.deconv = nn.ConvTranspose2d(in_channels, out_channels, 4, stride=2, padding=1)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.deconv(x) + self.bias)


batch_size = 64
in_channels = 64
out_channels = 32
height = 64
width = 64


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "conv_chain",
    "sizes": {"cpu": {"batch_size": 2, "in_channels": 16, "out_channels": 8, "height": 16, "width": 16}},
    "shapes": {"cpu": {"batch_size": [1, 2]}, "gpu": {"batch_size": [16, 64]}},
}
