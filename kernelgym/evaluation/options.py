"""EvalOptions: every knob of one evaluation, with defaults that match the documented judge."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from kernelgym.errors import ConfigError

# `dtype=` names: the short ones and torch's own.
DTYPES = {"fp32": "float32", "float32": "float32", "bf16": "bfloat16", "bfloat16": "bfloat16",
          "fp16": "float16", "float16": "float16"}
SHAPES = ("shown", "heldout")


@dataclass
class EvalOptions:
    size: str | None = None  # "cpu" or "gpu"; None: gpu when the run is on a GPU, else cpu
    timeout_s: float = 60.0  # per stage: import, __init__, correctness, timing, profile (builds aside)
    build_timeout_s: float = 300.0  # all of an evaluation's builds together (at import, in __init__, forward)
    correctness_trials: int = 5
    perturbed_trials: int = 1  # of those, trials with scaled/shifted float inputs (where the task allows)
    timing: bool = True
    timing_trials: int = 30  # timed batches per side, at most
    # per side; stops early once spent (after at least min(5, timing_trials) batches)
    timing_budget_s: float = 4.0
    # ... and sooner once the speedup's 95% interval is this tight (its half-width over the speedup): more
    # batches would not change the verdict or the reward beyond that (0: always to the budget)
    timing_precision: float = 0.03
    # ... or this tight, once the whole interval is below `threshold`: no speedup can be verified, so the
    # rewards pay the same for any value in it (the speedup reported is still within this fraction)
    timing_precision_unverified: float = 0.10
    timing_batch_ms: float | None = None  # a timed batch lasts about this long (None: GPU 25, CPU 10)
    max_calls_per_batch: int = 64
    warmup: int = 1  # untimed batches per side before timing
    # baselines on a GPU: less the calibrated cost of the in-region synchronize
    subtract_sync_cost: bool = True
    # CPU: the share of a side's clocked batches it may spend waiting for a CPU (other processes holding its
    # cores) before the timing is marked `contended`: its speedup is then never verified (a load that
    # comes and goes falls on some batches and not others)
    max_contention: float = 0.2
    max_cpu_time_ratio: float = 1.25  # CPU: the candidate tree's CPU time over wall time, per allowed thread
    profile: bool = True  # coverage and torch-compute check (CPU: cheap; GPU: torch.profiler)
    ncu: bool = False  # GPU: Nsight Compute counters per kernel after an ok verdict (costs seconds; opt-in)
    # GPU: the worker watches every kernel launch of the candidate from outside its process, in every batch
    # from its construction on (evaluation/launch_watch.py), and that evidence decides whether the solution's
    # own kernels did the work (evaluation/gpu_evidence.py); the in-process profile can only add a finding,
    # and evidence that could not be complete leaves the speedup unverified (own_code_unverified). On by
    # default since benchmarks/gpu/gpu_integrity.sh showed, on an H100, every honest Triton and CUDA example
    # `ok` with it and no cheat credited, where the in-process profile alone credited 5
    # (docs/gpu-own-code-wiring.md). CPU evaluations never use it.
    launch_evidence: bool = True
    ncu_timeout_s: float = 60.0
    threshold: float = 1.0  # a verified speedup needs the interval's low end above this
    implausible_speedup: float = 5.0  # above this the timing is repeated and must reproduce
    reproduce_tolerance: float = 0.10
    confirm_verified: bool = True  # a speedup about to be verified is timed again and must clear it twice
    max_torch_share: float = 0.3  # ATen compute above this share of the candidate's time is a passthrough
    max_untracked_share: float = 0.5  # CPU: time in neither its kernels nor ATen (another library's code)
    # ... per call, counted only above this much, so Python's overhead is no hack
    min_untracked_ms: float = 0.1
    threads: int = 1  # CPU threads for torch and OpenMP during timing
    compile_baseline: bool = False  # also report the speedup over torch.compile of the reference (cached)
    # time the reference (eager, and compiled with compile_baseline); no candidate
    baseline_only: bool = False
    refresh_baseline: bool = False  # with baseline_only: measure again even when a cached baseline exists
    # "heldout": correctness is also checked on shapes the judge draws within the task's stated limits
    shapes: str = "shown"
    heldout_variants: int = 2  # shapes drawn per evaluation under shapes="heldout"
    # None: the task's own dtype; "bf16"/"fp16"/"fp32": float inputs and parameters in that dtype
    dtype: str | None = None
    seed: int | None = None  # fixes the hidden seeds (for debugging only: normal runs draw fresh ones)

    @classmethod
    def from_kwargs(cls, base: EvalOptions | None = None, **kwargs: Any) -> EvalOptions:
        known = {f.name for f in fields(cls)}
        unknown = set(kwargs) - known
        if unknown:
            raise ConfigError(f"unknown evaluation option(s) {sorted(unknown)}; known: {sorted(known)}")
        values = {f.name: getattr(base, f.name) for f in fields(cls)} if base else {}
        values.update(kwargs)
        options = cls(**values)
        if options.size not in (None, "cpu", "gpu"):
            raise ConfigError(f"size must be 'cpu' or 'gpu', not {options.size!r}")
        if options.shapes not in SHAPES:
            raise ConfigError(f"shapes must be one of {SHAPES}, not {options.shapes!r}")
        if options.dtype is not None:
            if options.dtype not in DTYPES:
                raise ConfigError(f"dtype must be one of {sorted(DTYPES)} or None, not {options.dtype!r}")
            options.dtype = DTYPES[options.dtype]
        if options.heldout_variants < 1:
            raise ConfigError("heldout_variants must be at least 1")
        if options.correctness_trials < 1 or options.timing_trials < 1:
            raise ConfigError("correctness_trials and timing_trials must be at least 1")
        return options
