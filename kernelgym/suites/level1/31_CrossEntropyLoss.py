import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Cross entropy of class logits against integer class targets, averaged over the batch (a scalar)."""

    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, targets)


batch_size = 24576
num_classes = 4096


def get_inputs():
    return [torch.randn(batch_size, num_classes), torch.randint(0, num_classes, (batch_size,))]


def get_init_inputs():
    return []


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "loss",
    "sizes": {"cpu": {"batch_size": 256, "num_classes": 1000}},
    "shapes": {"cpu": {"batch_size": [64, 256]}, "gpu": {"batch_size": [6144, 24576]}},
}
