"""What a bench is asked to run (`BenchConfig`: env ids or a task source, policy, baseline, turns, samples,
evaluator) and the checks of it that need no model or worker (`validate`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kernelgym.agents import baselines
from kernelgym.errors import KernelGymError, did_you_mean

# Task sources with env ids of their own: `--suite NAME` benches these ids. Any other source (`hf`, a folder)
# is benched through the KernelGym-L<N>-v0 ids of the levels it has, with the source passed to gym.make.
SUITE_ENVS = {"bundled": "KernelGym-v0", "kernelbench": "KernelBench-v0", "backward": "KernelGym-Backward-v0",
              "curriculum": "KernelGym-Curriculum-v0"}


DEFAULT_ENV = "KernelGym-v0"


class BenchError(KernelGymError, RuntimeError):
    """A bench that cannot run as asked (unknown environment, no matching task, another run's folder)."""


@dataclass
class BenchConfig:
    env: str = DEFAULT_ENV  # an id, a comma list of ids, or a family without level (all its levels)
    # a task source instead of (or within) env: a suite name, `hf`, or a folder of task files
    suite: str | None = None
    policy: str = "replay:cpp+cheats"
    baseline: str = "refine"
    backend: str = "cpp"
    size: str = "cpu"
    tasks: str = "auto"  # auto (what the policy covers, else all), all, or comma-separated globs / substrings
    samples: int = 1
    turns: int | None = None  # None: the policy's suggestion (replay: its files per task), else 4
    concurrency: int = 1  # episodes in flight (each with its own env; all share one evaluation pool)
    # evaluation worker processes (default: concurrency; on Ray: the cluster's)
    eval_workers: int | None = None
    evaluator: str = "local"  # local (an EvalPool here) or ray[://ADDRESS] (kernelgym.distributed)
    out: str | None = None  # default: runs/bench/<env>__<policy>__<baseline>
    reward: str = "speedup"
    seed: int = 0
    kernelbench_root: str | None = None
    baseline_options: dict[str, Any] = field(default_factory=dict)
    eval_options: dict[str, Any] = field(default_factory=dict)  # more EvalOptions for the judge
    tensorboard: bool = True
    shapes: str = "shown"  # "heldout": correctness also at shapes the judge draws (EnvConfig.shapes)
    dtype: str | None = None  # "bf16", "fp16", "fp32": the run's float dtype (EnvConfig.dtype)


def validate(config: BenchConfig) -> None:
    """Every argument that can be checked without a model or a worker, checked before any work starts."""
    import dataclasses

    from kernelgym.evaluation.options import EvalOptions

    module = baselines.get(config.baseline)
    config_class = getattr(module, baselines.CONFIGS[config.baseline])
    known = [f.name for f in dataclasses.fields(config_class)]
    unknown = sorted(set(config.baseline_options) - set(known))
    if unknown:
        hint = did_you_mean(unknown[0], known)
        raise BenchError(f"unknown -o key(s) {unknown} for --baseline {config.baseline} "
                         f"({config_class.__name__}); known: {', '.join(known)}.{hint}")
    baselines.make_config(config.baseline, **config.baseline_options)  # the values, as the baseline checks
    EvalOptions.from_kwargs(**config.eval_options)  # an unknown --eval-option key, named with the known ones
    EvalOptions.from_kwargs(shapes=config.shapes, **({"dtype": config.dtype} if config.dtype else {}))
    if config.seed < 0:
        raise BenchError(f"--seed must be 0 or more (seeds are numpy's), not {config.seed}")
    if config.samples < 1 or config.concurrency < 1:
        raise BenchError("--samples and --concurrency must be at least 1")
    if config.turns is not None and config.turns < 1:
        raise BenchError(f"--turns must be at least 1, not {config.turns}")

