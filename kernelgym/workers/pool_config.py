"""What an EvalPool is configured with, and what it finds out about the machine before it starts a worker:
whether there is a GPU (and how many), which cores it keeps for the GPUs' timing slots, and the environment
a worker inherits (nothing else: no API keys or tokens)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from kernelgym.evaluation.options import EvalOptions
from kernelgym.workers.sandbox import SandboxConfig

# Variables a worker may inherit; everything else (API keys, tokens, cloud credentials) stays behind.
INHERITED_ENV = (
    "PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "LD_LIBRARY_PATH", "PYTHONPATH", "VIRTUAL_ENV", "CUDA_HOME",
    "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "TORCH_CUDA_ARCH_LIST", "KERNELGYM_CUDA_ARCH", "CXX", "CC", "NVCC",
    "TRITON_PTXAS_PATH", "TRITON_LIBDEVICE_PATH", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "PYTHONUNBUFFERED",
    "KERNELGYM_LOCK_DIR",
)


def timing_cores(config: PoolConfig, gpu: bool, slots: int) -> list[int]:
    """The cores a GPU pool keeps for its timing slots' holders, one a slot (a slot a GPU the pool spreads its
    workers over): the last ones this process may use; none where that would leave the rest too few."""
    cores = sorted(os.sched_getaffinity(0))
    slots = max(1, slots)
    wanted = config.timing_core if config.timing_core is not None else len(cores) >= 4 * slots
    return cores[-slots:] if wanted and gpu and len(cores) >= 2 * slots else []


@dataclass
class PoolConfig:
    # default: half the cores on a GPU machine (builds run on every core, timing waits for its GPU's slot),
    # else 2 on the CPU
    workers: int | None = None
    # precompile torch's headers and the common binders in the background at start (None: on a GPU machine,
    # where most candidates are CUDA extensions; elsewhere the first build pays)
    warm_builds: bool | None = None
    # start every worker in the background at once (None: on a GPU machine, where a worker's start, ~6 s,
    # would otherwise land on the first evaluation each worker takes); elsewhere a worker starts when needed
    prestart: bool | None = None
    # False: a worker skips the warm-ups that pay off only over many evaluations (the CPU profiler's
    # dispatch mode, Triton's driver helper and compiler), for a pool that judges one candidate and closes
    # (`kernelgym eval FILE`); an evaluation that needs one pays it in its own process instead
    warm_up: bool = True
    # each worker keeps its next reference and candidate processes started, waiting for their job (None: on
    # a GPU machine, where a process's CUDA context costs about half a second of every evaluation, unless the
    # pool is for one evaluation, warm_up=False)
    spare_processes: bool | None = None
    # GPU: a core kept for the evaluation that holds a GPU's timing slot (one per GPU the pool uses), its two
    # processes moved there for their timed batches; builds and every other process of the pool stay off it
    # (None: where the machine has 4 cores or more a GPU). Beside other workers' builds, the slot's holder
    # shared its core and held the slot 2-3 times as long as alone.
    timing_core: bool | None = None
    max_tasks_per_worker: int = 200
    start_timeout_s: float = 120.0
    work_root: str | None = None
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    options: EvalOptions = field(default_factory=EvalOptions)  # defaults for every evaluation
    gpu: bool | None = None  # None: detect
    # Re-runs, each on a fresh worker, of an evaluation whose judge failed; then `infrastructure_error`.
    infra_retries: int = 2
    infra_backoff_s: float = 1.0  # wait before the first re-run, doubled for each next (a full disk clears)
    min_free_disk_mb: int = 64  # less free space than this in the cache or work folder is a full disk


# Where a GPU driver shows itself (NVIDIA's, or ROCm's for torch's HIP build): without any of them there is
# no GPU, and the caller's process need not import torch (about a second) to learn it.
GPU_DRIVER_PATHS = ("/dev/nvidiactl", "/dev/nvidia0", "/proc/driver/nvidia", "/dev/kfd")


def has_gpu() -> bool:
    if not any(os.path.exists(path) for path in GPU_DRIVER_PATHS):
        return False
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001 - a broken driver is no GPU for choosing defaults
        return False


def scrubbed_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in INHERITED_ENV}
    env.update(extra)
    return env


def gpu_count() -> int:
    try:
        import torch

        return torch.cuda.device_count()
    except Exception:  # noqa: BLE001 - a broken driver is no GPU for choosing defaults
        return 0

