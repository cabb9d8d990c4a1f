"""kernelgym.envs: the Gymnasium environments (ids registered by `import kernelgym`).

Light to import: the environment class and the TRL adapter load on first use.
"""

from __future__ import annotations

from kernelgym._lazy import lazy_getattr
from kernelgym.envs.registration import env_ids, register_envs

_LAZY = {
    "KernelEnv": "kernelgym.envs.kernel_env",
    "make_kernel_env": "kernelgym.envs.kernel_env",
    "shared_pool": "kernelgym.envs.kernel_env",
    "EnvConfig": "kernelgym.envs.config",
    "parse_reply": "kernelgym.envs.parsing",
    "read_episodes": "kernelgym.envs.trajectory",
    "KernelToolEnv": "kernelgym.envs.trl_adapter",
    "Observation": "kernelgym.envs.types",
    "ResetInfo": "kernelgym.envs.types",
    "StepInfo": "kernelgym.envs.types",
    "BestSolution": "kernelgym.envs.types",
}


__getattr__ = lazy_getattr("kernelgym.envs", _LAZY)


__all__ = ["BestSolution", "EnvConfig", "KernelEnv", "KernelToolEnv", "Observation", "ResetInfo", "StepInfo",
           "env_ids", "make_kernel_env", "parse_reply", "read_episodes", "register_envs", "shared_pool"]
