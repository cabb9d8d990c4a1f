import torch
import torch.nn as nn


class Model(nn.Module):
    """Three-layer perceptron: Linear -> ReLU -> Linear -> ReLU -> Linear."""

    def __init__(self, input_size: int, hidden1: int, hidden2: int, output_size: int):
        super().__init__()
        self.fc1 = nn.Linear(input_size, hidden1)
        self.fc2 = nn.Linear(hidden1, hidden2)
        self.fc3 = nn.Linear(hidden2, output_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return self.fc3(x)


batch_size = 2048
input_size = 2048
hidden1 = 4096
hidden2 = 4096
output_size = 1024


def get_inputs():
    return [torch.randn(batch_size, input_size)]


def get_init_inputs():
    return [input_size, hidden1, hidden2, output_size]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "mlp",
    "sizes": {
        "cpu": {"batch_size": 256, "input_size": 256, "hidden1": 512, "hidden2": 512, "output_size": 128}
    },
    "shapes": {"cpu": {"batch_size": [64, 256]}, "gpu": {"batch_size": [512, 2048]}},
}
