import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """KL divergence KL(target || prediction) between two softmax distributions given by logits.

    Both sides are turned into log-probabilities first, so any real-valued logits are valid inputs; the sum
    over classes is averaged over the batch ('batchmean'), giving a scalar.
    """

    def __init__(self):
        super().__init__()

    def forward(self, pred_logits: torch.Tensor, target_logits: torch.Tensor) -> torch.Tensor:
        log_p = F.log_softmax(pred_logits, dim=-1)
        log_q = F.log_softmax(target_logits, dim=-1)
        return F.kl_div(log_p, log_q, reduction="batchmean", log_target=True)


batch_size = 24576
num_classes = 4096


def get_inputs():
    return [torch.randn(batch_size, num_classes), torch.randn(batch_size, num_classes)]


def get_init_inputs():
    return []


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "loss",
    "sizes": {"cpu": {"batch_size": 128, "num_classes": 1024}},
    "shapes": {"cpu": {"batch_size": [32, 128]}, "gpu": {"batch_size": [6144, 24576]}},
}
