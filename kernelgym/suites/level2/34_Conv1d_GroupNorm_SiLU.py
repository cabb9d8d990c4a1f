import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Same-padded 1-D convolution over a sequence, group normalization, then SiLU."""

    def __init__(self, in_channels: int, out_channels: int, num_groups: int):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, 3, padding=1)
        self.norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(self.norm(self.conv(x)))


batch_size = 64
in_channels = 128
out_channels = 128
num_groups = 16
length = 8192


def get_inputs():
    return [torch.randn(batch_size, in_channels, length)]


def get_init_inputs():
    return [in_channels, out_channels, num_groups]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "conv_chain",
    "sizes": {"cpu": {"batch_size": 4, "in_channels": 32, "out_channels": 32, "num_groups": 8, "length": 512}},
    "shapes": {"cpu": {"batch_size": [1, 4]}, "gpu": {"batch_size": [16, 64]}},
}
