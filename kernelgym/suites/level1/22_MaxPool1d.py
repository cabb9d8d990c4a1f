import torch
import torch.nn as nn


class Model(nn.Module):
    """1D max pooling over the length of a (batch, channels, length) signal, dilated window."""

    def __init__(self, kernel_size: int, stride: int, padding: int, dilation: int):
        super().__init__()
        self.pool = nn.MaxPool1d(kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


batch_size = 64
channels = 96
length = 16384
kernel_size = 4
stride = 2
padding = 2
dilation = 2


def get_inputs():
    return [torch.randn(batch_size, channels, length)]


def get_init_inputs():
    return [kernel_size, stride, padding, dilation]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "pooling",
    "sizes": {"cpu": {"batch_size": 4, "channels": 16, "length": 4096}},
    "shapes": {"cpu": {"batch_size": [1, 4]}, "gpu": {"batch_size": [16, 64]}},
}
