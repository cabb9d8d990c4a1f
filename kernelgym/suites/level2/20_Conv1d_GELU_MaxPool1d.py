import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Same-padded 1-D convolution over a sequence, GELU, then max pooling by 2 along the sequence."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.max_pool1d(F.gelu(self.conv(x)), 2)


batch_size = 64
in_channels = 64
out_channels = 128
length = 8192
kernel_size = 5


def get_inputs():
    return [torch.randn(batch_size, in_channels, length)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "conv_chain",
    "sizes": {"cpu": {"batch_size": 4, "in_channels": 16, "out_channels": 32, "length": 512}},
    "shapes": {"cpu": {"batch_size": [1, 4]}, "gpu": {"batch_size": [16, 64]}},
}
