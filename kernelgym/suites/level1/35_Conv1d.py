import torch
import torch.nn as nn


class Model(nn.Module):
    """1D convolution over a (batch, channels, length) signal with a strided, padded kernel."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, stride=stride, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


batch_size = 64
in_channels = 64
out_channels = 128
length = 16384
kernel_size = 7
stride = 2


def get_inputs():
    return [torch.randn(batch_size, in_channels, length)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "convolution",
    "sizes": {"cpu": {"batch_size": 4, "in_channels": 16, "out_channels": 32, "length": 1024}},
    "shapes": {"cpu": {"batch_size": [1, 4]}, "gpu": {"batch_size": [16, 64]}},
}
