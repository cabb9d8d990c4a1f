"""kernelgym's `verifiers` environment under the top-level name verifiers' loader imports.

verifiers resolves a taskset id by importing a top-level module (`vf-eval kernelgym_verifiers ...`); a
dotted path such as `kernelgym.envs.verifiers_adapter` is not accepted there. The code lives in
`kernelgym.envs.verifiers_adapter`; this package only re-exports it (and needs `kernelgym[verifiers]`).
"""

from kernelgym.envs.verifiers_adapter import (
    KernelGymConfig,
    KernelGymData,
    KernelGymEnv,
    KernelGymEnvConfig,
    KernelGymTask,
    KernelGymTaskset,
)

__all__ = ["KernelGymConfig", "KernelGymData", "KernelGymEnv", "KernelGymEnvConfig", "KernelGymTask",
           "KernelGymTaskset"]
