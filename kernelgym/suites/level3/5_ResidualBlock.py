import torch
import torch.nn as nn


class Model(nn.Module):
    """ResNet basic block that halves the resolution and widens the channels.

    Main path: 3x3 stride-2 conv -> BN -> ReLU -> 3x3 conv -> BN. Shortcut: 1x1 stride-2 conv -> BN.
    The two are added and passed through a ReLU. Batch norm uses the current batch's statistics.
    """

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.shortcut_conv = nn.Conv2d(in_channels, out_channels, 1, stride=2, bias=False)
        self.shortcut_bn = nn.BatchNorm2d(out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + self.shortcut_bn(self.shortcut_conv(x)))


batch_size = 64
in_channels = 64
out_channels = 128
height = 128
width = 128


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "cnn",
    "sizes": {"cpu": {"batch_size": 4, "in_channels": 32, "out_channels": 64, "height": 32, "width": 32}},
    "shapes": {"cpu": {"batch_size": [1, 4]}, "gpu": {"batch_size": [16, 64]}},
}
