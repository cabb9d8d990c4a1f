"""Every error kernelgym raises on purpose is a KernelGymError, and unknown names get suggestions."""

from __future__ import annotations

import pytest

from kernelgym.agents import baselines
from kernelgym.agents.bench_config import BenchError
from kernelgym.agents.bench_plan import expand_env_ids
from kernelgym.agents.policies import make_policy
from kernelgym.agents.policies.openai_compat import EndpointError
from kernelgym.errors import ConfigError, KernelGymError, TaskNotFoundError, did_you_mean
from kernelgym.kernels import BuildError
from kernelgym.tasks import bundled
from kernelgym.workers.protocol import ProtocolError


@pytest.mark.parametrize("error", [BenchError, EndpointError, BuildError, ProtocolError, ConfigError])
def test_errors_share_the_base(error):
    assert issubclass(error, KernelGymError)


def test_did_you_mean():
    assert did_you_mean("refin", baselines.BASELINES) == " Did you mean 'refine'?"
    assert did_you_mean("zzz", baselines.BASELINES) == ""


def test_unknown_task_id_gets_a_suggestion():
    with pytest.raises(TaskNotFoundError, match=r"Did you mean 'L1/1_ReLU'"):
        bundled().get("L1/1_Relu")


def test_unknown_baseline_policy_and_env_get_suggestions():
    with pytest.raises(ConfigError, match=r"Did you mean 'best_of_n'"):
        baselines.get("best_of_m")
    with pytest.raises(ConfigError, match=r"Did you mean 'replay'"):
        make_policy("replya:cpp")
    with pytest.raises(ConfigError, match=r"Did you mean 'cpp'"):
        make_policy("replay:cppp")
    with pytest.raises(BenchError, match=r"Did you mean 'KernelGym-L1-v0'"):
        expand_env_ids("KernelGym-L1-v1")


def test_import_kernelgym_does_not_hide_a_broken_subpackage():
    import subprocess
    import sys

    code = "import sys; sys.modules['kernelgym.envs.registration'] = None; import kernelgym"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert run.returncode != 0 and "ModuleNotFoundError" in run.stderr
