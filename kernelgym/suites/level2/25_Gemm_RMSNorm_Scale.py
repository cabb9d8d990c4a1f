import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear layer, then RMS normalization over the features with a learned per-feature gain."""

    def __init__(self, in_features: int, out_features: int, eps: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.gain = nn.Parameter(1.0 + torch.randn(out_features) * 0.1)
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        inv_rms = torch.rsqrt(y.pow(2).mean(dim=1, keepdim=True) + self.eps)
        return y * inv_rms * self.gain


batch_size = 2048
in_features = 4096
out_features = 4096
eps = 1e-6


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, eps]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "gemm_chain",
    "sizes": {"cpu": {"batch_size": 128, "in_features": 512, "out_features": 512}},
    "shapes": {"cpu": {"batch_size": [32, 128]}, "gpu": {"batch_size": [512, 2048]}},
}
