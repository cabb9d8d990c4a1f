import torch
import torch.nn as nn


class Model(nn.Module):
    """MobileNet-style depthwise-separable block.

    3x3 depthwise conv -> BN -> ReLU6 -> 1x1 pointwise conv -> BN -> ReLU6 (batch norm in training mode).
    """

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.depthwise = nn.Conv2d(in_channels, in_channels, 3, padding=1, groups=in_channels, bias=False)
        self.bn1 = nn.BatchNorm2d(in_channels)
        self.pointwise = nn.Conv2d(in_channels, out_channels, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.act = nn.ReLU6()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.act(self.bn1(self.depthwise(x)))
        return self.act(self.bn2(self.pointwise(x)))


batch_size = 32
in_channels = 128
out_channels = 256
height = 112
width = 112


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "cnn",
    "sizes": {"cpu": {"batch_size": 4, "in_channels": 64, "out_channels": 64, "height": 28, "width": 28}},
    "shapes": {"cpu": {"batch_size": [1, 4]}, "gpu": {"batch_size": [8, 32]}},
}
