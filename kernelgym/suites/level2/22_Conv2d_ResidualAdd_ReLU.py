import torch
import torch.nn as nn


class Model(nn.Module):
    """Channel-preserving same-padded 3x3 convolution, the input added back (residual), then ReLU."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x) + x)


batch_size = 32
channels = 64
height = 128
width = 128


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "conv_chain",
    "sizes": {"cpu": {"batch_size": 2, "channels": 16, "height": 32, "width": 32}},
    "shapes": {"cpu": {"batch_size": [1, 2]}, "gpu": {"batch_size": [8, 32]}},
}
