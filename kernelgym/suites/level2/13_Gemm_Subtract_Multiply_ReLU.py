import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear layer, a learned per-feature offset subtracted and gain multiplied, then ReLU."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.offset = nn.Parameter(torch.randn(out_features) * 0.1)
        self.gain = nn.Parameter(torch.rand(out_features) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu((self.linear(x) - self.offset) * self.gain)


batch_size = 2048
in_features = 8192
out_features = 2048


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "gemm_chain",
    "sizes": {"cpu": {"batch_size": 128, "in_features": 1024, "out_features": 256}},
    "shapes": {"cpu": {"batch_size": [32, 128]}, "gpu": {"batch_size": [512, 2048]}},
}
