import torch
import torch.nn as nn


class Model(nn.Module):
    """Two conv-batchnorm-ReLU stages (3x3, same padding, bias-free convs as is usual before batch norm).

    Batch norm runs in training mode: it normalises with the statistics of the current batch.
    """

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(x)))


batch_size = 32
in_channels = 32
out_channels = 64
height = 128
width = 128


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "cnn",
    "sizes": {"cpu": {"batch_size": 4, "in_channels": 16, "out_channels": 32, "height": 32, "width": 32}},
    "shapes": {"cpu": {"batch_size": [1, 4]}, "gpu": {"batch_size": [8, 32]}},
}
