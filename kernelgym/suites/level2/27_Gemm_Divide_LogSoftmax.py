import torch
import torch.nn as nn


class Model(nn.Module):
    """Classifier head: linear layer, division by a temperature, then log-softmax over the classes."""

    def __init__(self, in_features: int, num_classes: int, temperature: float):
        super().__init__()
        self.linear = nn.Linear(in_features, num_classes)
        self.temperature = temperature

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(self.linear(x) / self.temperature, dim=1)


batch_size = 2048
in_features = 4096
num_classes = 4096
temperature = 0.5


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, num_classes, temperature]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "gemm_chain",
    "sizes": {"cpu": {"batch_size": 128, "in_features": 512, "num_classes": 512}},
    "shapes": {"cpu": {"batch_size": [32, 128]}, "gpu": {"batch_size": [512, 2048]}},
}
