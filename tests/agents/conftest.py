"""Fixtures for the agent tests: a tiny random chat model, a served copy of it, and solution texts."""

from __future__ import annotations

import pytest

import kernelgym  # noqa: F401  (registers the ids)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    from kernelgym.agents.tiny import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="session")
def tiny_policy(tiny_model_dir):
    from kernelgym.agents.policies.hf import HFPolicy, SamplingConfig

    return HFPolicy(str(tiny_model_dir), sampling=SamplingConfig(max_new_tokens=12, seed=0))


@pytest.fixture(scope="session")
def tiny_server(tiny_policy):
    """The OpenAI-compatible server on a free 127.0.0.1 port, serving the tiny model from a thread."""
    from kernelgym.agents.serve import ChatServer

    with ChatServer(tiny_policy, model_name="tiny") as server:
        yield server


# These tests check the agent loop, not the judge's timing: the timing is kept short.
LENIENT_JUDGE = {"timing_budget_s": 1.0}


@pytest.fixture
def env_factory(pool):
    """gym.make on the bundled suite with the cpp judge at the cpu size, on the session's pool."""
    import gymnasium as gym

    made = []

    def make(env_id: str = "KernelGym-L1-v0", **kwargs):
        kwargs.setdefault("eval_options", dict(LENIENT_JUDGE))
        env = gym.make(env_id, backend="cpp", size="cpu", pool=pool, **kwargs)
        made.append(env)
        return env

    yield make
    for env in made:
        env.close()


BROKEN_CPP = '''
import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

_lib = load_cpp(r"""
#include <cstdint>
extern "C" void relu_forward(const float* x, float* y, int64_t n) { this is not C++ }
""")


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.relu_forward(x, y, x.numel())
        return y
'''


@pytest.fixture(scope="session")
def broken_solution():
    return BROKEN_CPP
