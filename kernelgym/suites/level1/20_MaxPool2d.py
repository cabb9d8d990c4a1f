import torch
import torch.nn as nn


class Model(nn.Module):
    """2D max pooling of an image batch with a padded, overlapping window (padding never wins the max)."""

    def __init__(self, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel_size=kernel_size, stride=stride, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


batch_size = 32
channels = 64
height = 224
width = 224
kernel_size = 3
stride = 2
padding = 1


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [kernel_size, stride, padding]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "pooling",
    "sizes": {"cpu": {"batch_size": 4, "channels": 16, "height": 64, "width": 64}},
    "shapes": {"cpu": {"batch_size": [1, 4]}, "gpu": {"batch_size": [8, 32]}},
}
