import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Linear layer, group normalization over groups of output features, then Mish."""

    def __init__(self, in_features: int, out_features: int, num_groups: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.norm = nn.GroupNorm(num_groups, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.mish(self.norm(self.linear(x)))


batch_size = 4096
in_features = 2048
out_features = 4096
num_groups = 32


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, num_groups]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "gemm_chain",
    "sizes": {"cpu": {"batch_size": 128, "in_features": 256, "out_features": 512, "num_groups": 16}},
    "shapes": {"cpu": {"batch_size": [32, 128]}, "gpu": {"batch_size": [1024, 4096]}},
}
