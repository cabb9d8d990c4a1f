"""Helpers for the environment tests (a uniquely named module: `conftest` is taken by tests/conftest.py)."""

from __future__ import annotations

import textwrap

PROBLEM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x){extra}


batch_size = {batch}
dim = 64


def get_inputs():
    return [torch.rand(batch_size, dim) * 2 - 1]


def get_init_inputs():
    return []
'''


def write_kernelbench(root, per_level=(4, 2, 1)):
    """A KernelBench checkout's layout (root/KernelBench/levelN/<id>_<name>.py) with small problems."""
    for level, count in zip((1, 2, 3), per_level):
        folder = root / "KernelBench" / f"level{level}"
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(1, count + 1):
            name = f"{i}_Relu_Variant{i}.py" if level != 3 else f"{i}_TinyNet{i}.py"
            (folder / name).write_text(PROBLEM.format(extra=" * 1.0" * (i - 1), batch=8 * i))
    return root


def fenced(source: str) -> str:
    return f"Here is my kernel.\n\n```python\n{source.rstrip()}\n```\n"


# A task whose reference does its ReLU four times (the same result, four passes over memory): one honest
# C++ pass is then several times faster, so a verified speedup can be tested without relying on luck.
SLOW_RELU = textwrap.dedent('''
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def __init__(self):
            super().__init__()

        def forward(self, x):
            y = torch.relu(x)
            y = torch.relu(y)
            y = torch.relu(y)
            return torch.relu(y)


    batch_size = 256
    dim = 4096


    def get_inputs():
        return [torch.rand(batch_size, dim) * 2 - 1]


    def get_init_inputs():
        return []
''')
