"""The static stage: the contract and the few unambiguous cheats; never style."""

import pytest

from kernelgym.backends import get
from kernelgym.evaluation.static import static_check

MODEL = """
class ModelNew(nn.Module):
    def forward(self, x):
        return ext.f(x)
"""


def rule_of(source: str, backend: str = "cuda") -> str:
    result = static_check(source, get(backend))
    return "pass" if result.passed else result.reasons[0].rule


@pytest.mark.parametrize("build", [
    "from torch.utils.cpp_extension import load_inline\next = load_inline('e', '', cuda_sources='')",
    "from torch.utils.cpp_extension import load\next = load(name='e', sources=['e.cu'])",
    "import torch.utils.cpp_extension as ce\next = ce.load('e', ['e.cu'])",
    "import torch.utils.cpp_extension\next = torch.utils.cpp_extension.load('e', ['e.cu'])",
    "from kernelgym.kernels import load_cuda\next = load_cuda('src')",
    # a builder reached however the code likes: annotated, in a getter, in a container
    ("from torch.utils.cpp_extension import load_inline as li\n"
     "built: dict = {'f': li('e', '', cuda_sources='')}"),
    # passed on or bound to another name (a helper's honest answers were no_kernel)
    ("import functools\nfrom torch.utils.cpp_extension import load_inline\n"
     "build = functools.partial(load_inline, cuda_sources='')\next = build('e', '')"),
    "from torch.utils.cpp_extension import load_inline\n_build = load_inline\next = _build('e', '')",
])
def test_every_way_of_building_a_kernel_meets_the_contract(build):
    assert rule_of(build + "\n" + MODEL) == "pass"


@pytest.mark.parametrize("not_a_build", [
    "import json\next = json.load(open('weights.json'))",
    "from json import load\next = load(open('weights.json'))",
    "import torch\next = torch.load('weights.pt')",
])
def test_other_libraries_loaders_are_not_kernels(not_a_build):
    assert rule_of(not_a_build + "\n" + MODEL) == "no_kernel"


def test_model_new_and_forward_bound_by_assignment_meet_the_contract():
    """`ModelNew = Fused` and `forward = _fused` in the class body are ordinary Python (a helper's honest
    answers were no_model_new and no_forward); the run checks what the name holds."""
    build = "from torch.utils.cpp_extension import load_inline\next = load_inline('e', '', cuda_sources='')\n"
    fused = "class Fused(nn.Module):\n    def forward(self, x):\n        return ext.f(x)\n"
    assert rule_of(build + fused + "ModelNew = Fused\n") == "pass"
    assert rule_of(build + "ModelNew = make_model()\n") == "pass"
    assert rule_of(build + "def _fused(self, x):\n    return ext.f(x)\n"
                   "class ModelNew(nn.Module):\n    forward = _fused\n") == "pass"
    assert rule_of(build + "class Empty(nn.Module):\n    pass\nModelNew = Empty\n") == "no_forward"
    assert rule_of("class Fused(nn.Module):\n    def forward(self, x):\n        return x\n"
                   "ModelNew = Fused\n") == "no_kernel"


def test_the_contract_names_what_is_missing():
    assert rule_of("x = 1") == "no_model_new"
    assert rule_of("class ModelNew(nn.Module):\n    pass") == "no_forward"
    assert rule_of("class ModelNew(Model):\n    pass") == "inherits_reference"
    assert rule_of("def f(:") == "syntax_error"
    assert rule_of("   ") == "empty_source"


@pytest.mark.parametrize("patch,rule", [
    ("time.perf_counter = lambda: 0.0", "timer_patch"),
    ("torch.cuda.synchronize = lambda: None", "timer_patch"),
    ("setattr(torch, 'allclose', lambda *a, **k: True)", "comparison_patch"),
    # names computed from constants are followed (issue 28)
    ("setattr(time, 'perf_' + 'counter', lambda: 0.0)", "timer_patch"),
    ("NAME = 'perf_counter' + '_ns'\nsetattr(time, NAME, lambda: 0)", "timer_patch"),
    ("torch.__dict__['all' + 'close'] = lambda *a, **k: True", "comparison_patch"),
    ("vars(torch)[''.join(['eq', 'ual'])] = lambda *a: True", "comparison_patch"),
    ("PART = 'eq'\nsetattr(torch, f'{PART}ual', None)", "comparison_patch"),
])
def test_patching_the_clock_or_the_comparison_is_a_hack(patch, rule):
    source = "from kernelgym.kernels import load_cuda\next = load_cuda('src')\n" + patch + "\n" + MODEL
    assert rule_of(source) == rule


def test_computed_names_that_are_not_patches_pass():
    """A name bound twice is not a constant; a dict that is not a module's is not an attribute."""
    source = ("from kernelgym.kernels import load_cuda\next = load_cuda('src')\n"
              "NAME = 'perf_counter'\nNAME = 'other'\nsetattr(config, NAME, 1)\n"
              "table = {}\ntable['all' + 'close'] = 1\nsetattr(self_, 'perf_' + 'counter', 1)\n" + MODEL)
    assert rule_of(source) == "pass"


def test_style_is_not_evidence():
    """Idioms a ban list would catch: numpy, os, a main guard, try/except around the build, allow_tf32."""
    source = """
import os, numpy as np
from torch.utils.cpp_extension import load_inline
os.makedirs('build', exist_ok=True)
torch.backends.cuda.matmul.allow_tf32 = False
try:
    ext = load_inline('e', '', cuda_sources='')
except Exception:
    raise
SCALE = float(np.sqrt(2.0))
if __name__ == '__main__':
    pass
""" + MODEL
    assert rule_of(source) == "pass"
