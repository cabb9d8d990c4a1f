"""EnvConfig: every knob of a kernel environment, checked once when the environment is built."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kernelgym.envs.parsing import DONE_MARKER
from kernelgym.envs.spaces import MAX_TEXT
from kernelgym.errors import ConfigError

SAMPLING = ("random", "sequential")
ANSWER_FORMATS = ("reply", "tool")


@dataclass
class EnvConfig:
    # Where tasks come from: "bundled", "backward", "curriculum", "kernelbench", "hf", or a file or folder of
    # task files (see kernelgym.tasks.load_suite and docs/tasks.md).
    suite: str = "bundled"
    level: int | None = None
    kernelbench_root: str | None = None  # else $KERNELBENCH_ROOT, else a cached HF dataset
    # Task selection, applied in this order: ids, then the filter (TaskSet.filter kwargs or a predicate).
    task_ids: Sequence[str] | None = None
    task_filter: dict[str, Any] | Callable[[Any], bool] | None = None
    sampling: str = "random"  # "random": drawn from the env's RNG; "sequential": in order, cycling
    # A sampled task whose derived cpu size the degenerate-task screen flags (a constant or input-independent
    # output: a trivial answer would be paid) is skipped, as `kernelgym bench` leaves such tasks out; one
    # named by reset(options={"task_id": ...}) is still served, with the screen's warning.
    skip_degenerate: bool = True
    seed: int | None = None  # used by the first reset() that is given no seed
    # How solutions are judged.
    backend: str | None = None  # None: "cpp" without a GPU, else "triton"
    size: str = "auto"  # "cpu", "gpu", or "auto" (cpu when torch.cuda.is_available() is False)
    device: str = "auto"  # "cpu", "cuda" or "auto": where candidates run (decides the defaults above)
    pool: Any = None  # a shared EvalPool; None: the process's default pool, created on first evaluation
    profile: bool = True
    # "heldout": correctness is also checked at shapes the judge draws within each task's limits (the prompt
    # says so without naming them)
    shapes: str = "shown"
    dtype: str | None = None  # "bf16", "fp16", "fp32": float inputs and parameters in that dtype
    # more EvalOptions (timing_trials, timeout_s, ...)
    eval_options: dict[str, Any] = field(default_factory=dict)
    # The episode.
    max_turns: int = 4
    reward: str | Callable[..., float] = "speedup"
    reward_kwargs: dict[str, Any] = field(default_factory=dict)
    target_speedup: float | None = None  # terminate once a verified speedup reaches this
    done_marker: str = DONE_MARKER
    # Turns the judge failed (verdict infrastructure_error, after the pool's own re-runs) are given back: they
    # do not count toward max_turns. After this many in one episode, the next one ends it (truncated).
    max_unjudged_turns: int = 2
    answer_format: str = "reply"  # "reply" (fenced code in the reply) or "tool" (TRL's submit_kernel)
    # What the agent sees and what is kept.
    max_feedback_chars: int = 4000
    max_text_chars: int = MAX_TEXT
    trajectory_path: str | None = None
    render_mode: str | None = None

    @classmethod
    def from_kwargs(cls, config: EnvConfig | None = None, **kwargs: Any) -> EnvConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(kwargs) - known
        if unknown:
            raise ConfigError(f"unknown environment option(s) {sorted(unknown)}; known: {sorted(known)}")
        base = dataclasses.replace(config) if config is not None else cls()
        result = dataclasses.replace(base, **kwargs)
        result.validate()
        return result

    def validate(self) -> None:
        if not isinstance(self.max_turns, int) or self.max_turns < 1:
            raise ConfigError(f"max_turns must be a positive integer, not {self.max_turns!r}")
        if self.size not in ("auto", "cpu", "gpu"):
            raise ConfigError(f"size must be 'auto', 'cpu' or 'gpu', not {self.size!r}")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ConfigError(f"device must be 'auto', 'cpu' or 'cuda', not {self.device!r} (the pool picks "
                              "the GPU)")
        if self.sampling not in SAMPLING:
            raise ConfigError(f"sampling must be one of {SAMPLING}, not {self.sampling!r}")
        if self.answer_format not in ANSWER_FORMATS:
            raise ConfigError(f"answer_format must be one of {ANSWER_FORMATS}, not {self.answer_format!r}")
        if self.render_mode not in (None, "ansi"):
            raise ConfigError(f"render_mode must be None or 'ansi', not {self.render_mode!r}")
        if not isinstance(self.max_unjudged_turns, int) or self.max_unjudged_turns < 0:
            raise ConfigError(f"max_unjudged_turns must be an integer >= 0, not {self.max_unjudged_turns!r}")
        if self.target_speedup is not None and self.target_speedup <= 0:
            raise ConfigError("target_speedup must be positive")
        if self.max_feedback_chars < 100 or self.max_text_chars < 1000:
            raise ConfigError("max_feedback_chars must be >= 100 and max_text_chars >= 1000")
        for name in ("size", "shapes", "dtype"):
            if name in self.eval_options:
                raise ConfigError(f"set the {name} with {name}=..., not in eval_options")
        from kernelgym.evaluation.options import DTYPES, SHAPES

        if self.shapes not in SHAPES:
            raise ConfigError(f"shapes must be one of {SHAPES}, not {self.shapes!r}")
        if self.dtype is not None and self.dtype not in DTYPES:
            raise ConfigError(f"dtype must be one of {sorted(DTYPES)} or None, not {self.dtype!r}")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)
                                      or self.seed < 0):
            raise ConfigError(f"seed takes None or an integer >= 0 (numpy's seeds), not {self.seed!r}")
        if isinstance(self.task_ids, str):
            self.task_ids = [self.task_ids]
