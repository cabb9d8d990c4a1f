import torch
import torch.nn as nn


class Model(nn.Module):
    """Residual block with squeeze-and-excitation channel gating (SE-ResNet style).

    Body: 3x3 conv -> BN -> ReLU -> 3x3 conv -> BN. The body's output is rescaled per channel by
    sigmoid(FC(ReLU(FC(global average pool)))), added to the input, and passed through a ReLU.
    """

    def __init__(self, channels: int, reduction: int):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.squeeze = nn.Linear(channels, channels // reduction)
        self.excite = nn.Linear(channels // reduction, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        gate = out.mean(dim=(2, 3))
        gate = torch.sigmoid(self.excite(torch.relu(self.squeeze(gate))))
        out = out * gate[:, :, None, None]
        return torch.relu(out + x)


batch_size = 64
channels = 128
reduction = 16
height = 56
width = 56


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels, reduction]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "cnn",
    "sizes": {"cpu": {"batch_size": 4, "channels": 32, "reduction": 4, "height": 32, "width": 32}},
    "shapes": {"cpu": {"batch_size": [1, 4]}, "gpu": {"batch_size": [16, 64]}},
}
