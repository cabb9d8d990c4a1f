import torch
import torch.nn as nn


class Model(nn.Module):
    """A deep, narrow ReLU network: `depth` square hidden layers between an input and an output projection.

    Hidden weights use He (Kaiming) normal initialisation so the activations keep their scale through depth.
    """

    def __init__(self, input_size: int, width: int, depth: int, output_size: int):
        super().__init__()
        self.input_layer = nn.Linear(input_size, width)
        self.hidden = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])
        self.output_layer = nn.Linear(width, output_size)
        for layer in self.hidden:
            nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.input_layer(x))
        for layer in self.hidden:
            x = torch.relu(layer(x))
        return self.output_layer(x)


batch_size = 16384
input_size = 512
width = 512
depth = 14
output_size = 256


def get_inputs():
    return [torch.randn(batch_size, input_size)]


def get_init_inputs():
    return [input_size, width, depth, output_size]


# kernelgym metadata (read without running the file): the cpu size replaces the constants above.
KERNELGYM = {
    "category": "mlp",
    "sizes": {"cpu": {"batch_size": 512, "input_size": 128, "width": 128, "output_size": 64}},
    "shapes": {"cpu": {"batch_size": [128, 512]}, "gpu": {"batch_size": [4096, 16384]}},
}
