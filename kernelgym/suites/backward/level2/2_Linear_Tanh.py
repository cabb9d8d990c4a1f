import torch
import torch.nn as nn


class Model(nn.Module):
    """A linear layer, then tanh. Forward and backward are judged: the gradients of x, the weight and the bias
    for an upstream gradient."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.linear(x))


batch_size = 1024
in_features = 1024
out_features = 1024


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above; held-out
# shapes are drawn within the limits of "shapes".
# Gradients are sums over a whole dimension of perturbed (rescaled and shifted) inputs: values of a hundred or
# more, and those that cancel to near zero carry fp32 rounding of about 1e-4 in any summation order (an honest
# IEEE-fp32 Triton kernel on the H200 missed 1e-4 on 2-6 of a million). rtol stays 1e-4, which a TF32 product fails.
KERNELGYM = {
    "atol": 1e-3,
    "category": "gemm_chain",
    "backward": True,
    "sizes": {"cpu": {"batch_size": 64, "in_features": 256, "out_features": 256}},
    "shapes": {"cpu": {"batch_size": [8, 128], "in_features": [32, 512], "out_features": [32, 512]},
               "gpu": {"batch_size": [256, 2048], "in_features": [256, 2048], "out_features": [256, 2048]}},
}
