import torch
import torch.nn as nn


class Model(nn.Module):
    """Grouped linear layers (one weight matrix per group, as in expert MLPs) via bmm, bias, squared ReLU."""

    def __init__(self, num_groups: int, in_features: int, out_features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(num_groups, in_features, out_features) * in_features ** -0.5)
        self.bias = nn.Parameter(torch.randn(num_groups, 1, out_features) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(torch.bmm(x, self.weight) + self.bias)
        return y * y


num_groups = 8
tokens = 1024
in_features = 2048
out_features = 2048


def get_inputs():
    return [torch.randn(num_groups, tokens, in_features)]


def get_init_inputs():
    return [num_groups, in_features, out_features]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "gemm_chain",
    "sizes": {"cpu": {"num_groups": 4, "tokens": 64, "in_features": 256, "out_features": 256}},
    "shapes": {"cpu": {"tokens": [16, 64]}, "gpu": {"tokens": [256, 1024]}},
}
