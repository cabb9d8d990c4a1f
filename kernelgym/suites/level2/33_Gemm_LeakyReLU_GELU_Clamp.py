import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Linear layer, leaky ReLU, GELU, then an upper clamp at max_value."""

    def __init__(self, in_features: int, out_features: int, negative_slope: float, max_value: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.negative_slope = negative_slope
        self.max_value = max_value

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.leaky_relu(self.linear(x), self.negative_slope)
        return torch.clamp(F.gelu(x), max=self.max_value)


batch_size = 2048
in_features = 4096
out_features = 4096
negative_slope = 0.2
max_value = 0.5


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, negative_slope, max_value]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "gemm_chain",
    "sizes": {"cpu": {"batch_size": 96, "in_features": 384, "out_features": 384}},
    "shapes": {"cpu": {"batch_size": [24, 96]}, "gpu": {"batch_size": [512, 2048]}},
}
