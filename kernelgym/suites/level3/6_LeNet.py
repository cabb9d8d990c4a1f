import torch
import torch.nn as nn


class Model(nn.Module):
    """A LeNet-style classifier for 32x32 images.

    conv5x5 -> ReLU -> maxpool2 -> conv5x5 -> ReLU -> maxpool2 -> flatten -> FC -> ReLU -> FC -> ReLU -> FC.
    """

    def __init__(self, in_channels: int, num_classes: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 16, 5)
        self.conv2 = nn.Conv2d(16, 32, 5)
        self.pool = nn.MaxPool2d(2)
        self.fc1 = nn.Linear(32 * 5 * 5, 256)
        self.fc2 = nn.Linear(256, 128)
        self.fc3 = nn.Linear(128, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(torch.relu(self.conv1(x)))
        x = self.pool(torch.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return self.fc3(x)


batch_size = 8192
in_channels = 3
num_classes = 10


def get_inputs():
    return [torch.randn(batch_size, in_channels, 32, 32)]


def get_init_inputs():
    return [in_channels, num_classes]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "cnn",
    "sizes": {"cpu": {"batch_size": 32}},
    "shapes": {"cpu": {"batch_size": [8, 32]}, "gpu": {"batch_size": [2048, 8192]}},
}
