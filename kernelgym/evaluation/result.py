"""Results of an evaluation: one dataclass per stage, aggregated into EvalResult.

Stages that did not run are None. Everything here is plain data (JSON-able through `to_dict`): no
exception object or tensor ever travels in a result.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from kernelgym.evaluation.rules import Reason
from kernelgym.evaluation.verdict import Verdict


@dataclass
class StaticResult:
    passed: bool
    reasons: list[str] = field(default_factory=list)  # rules that failed: each one line, rule name first
    warnings: list[str] = field(default_factory=list)


@dataclass
class BuildResult:
    compiled: bool
    build_s: float = 0.0
    cached: bool = False
    runnable: bool = True  # False when the code compiled but this machine cannot run it (CUDA, no GPU)
    log: str = ""  # the compiler's messages, trimmed to the lines that matter


@dataclass
class LoadResult:
    loaded: bool
    load_s: float = 0.0
    error: str = ""


@dataclass
class TrialResult:
    index: int
    perturbed: bool
    passed: bool
    message: str = ""
    max_abs_diff: float | None = None
    max_rel_diff: float | None = None
    mismatch_fraction: float | None = None
    first_mismatch: list[int] | None = None
    expected_value: float | None = None
    actual_value: float | None = None
    lowered_precision: bool = False  # half dtypes: the outputs' error is that of a narrower type


@dataclass
class CorrectnessResult:
    passed: bool
    atol: float
    rtol: float
    trials: list[TrialResult] = field(default_factory=list)

    @property
    def first_failure(self) -> TrialResult | None:
        return next((t for t in self.trials if not t.passed), None)


@dataclass
class TimingStats:
    median_ms: float
    mean_ms: float
    std_ms: float
    ci_low_ms: float
    ci_high_ms: float
    trials: int


@dataclass
class TimingResult:
    available: bool
    reason: str = ""  # why timing is unavailable or was not trusted
    device: str = ""
    candidate: TimingStats | None = None
    reference: TimingStats | None = None
    speedup: float | None = None
    speedup_ci_low: float | None = None
    speedup_ci_high: float | None = None
    verified: bool = False  # correct, and the low end of the interval is above the threshold
    remeasured: bool = False
    # the fixed cost of one empty batch, taken off every batch (both sides)
    round_trip_ms: float | None = None
    calls_per_batch: int | None = None  # fresh-input calls timed together by the trusted clock
    batches: int | None = None  # timed batches per side
    # GPU: 'done' to the trusted copy of the last output (bounds hidden work)
    readback_lag_ms: float | None = None
    cpu_time_ratio: float | None = None  # CPU: the candidate tree's CPU time over its batches' wall time
    # CPU: the tree's CPU time beyond its timed batches' clocks x cores (work left running past 'done'),
    # added to those batches' times
    cpu_past_clock_ms: float | None = None
    # CPU: the share of its clocked batches' time a side's threads waited for a CPU (other processes held
    # its cores), the larger side's; above max_contention the timing is `contended`, its speedup unverified
    cpu_wait_share: float | None = None
    contended: bool = False
    baseline: str = "eager"
    compile_ms: float | None = None  # torch.compile of the reference, when asked for
    speedup_vs_compile: float | None = None
    compile_baseline_cached: bool = False
    flops: float | None = None  # of the task (torch.utils.flop_counter)
    min_bytes: float | None = None  # inputs, parameters and outputs, each moved once
    floor_ms: float | None = None  # the roofline's least time on this machine's measured peaks
    bound: str | None = None  # "memory" or "compute"
    roofline_fraction: float | None = None  # floor_ms / the candidate's median time


@dataclass
class KernelMetrics:
    """Nsight Compute's counters for one kernel launch of the candidate (EvalOptions.ncu)."""

    kernel: str
    duration_us: float | None = None
    memory_throughput_pct: float | None = None  # of the peak DRAM/L2/L1 throughput
    compute_throughput_pct: float | None = None  # SM throughput, of peak
    achieved_occupancy_pct: float | None = None  # active warps, of the maximum
    registers_per_thread: float | None = None
    local_load_instructions: float | None = None  # local memory traffic: register spills (or local arrays)
    local_store_instructions: float | None = None


@dataclass
class ProfileResult:
    coverage: float | None = None  # share of the candidate's time spent in kernels it built
    own_kernel_calls: int = 0
    top_ops: list[tuple[str, float]] = field(default_factory=list)  # (op or kernel name, ms)
    heavy_torch_ops: list[str] = field(default_factory=list)
    kernels: list[KernelMetrics] = field(default_factory=list)  # with EvalOptions.ncu, where ncu works
    ncu_note: str = ""  # what the ncu pass did, or why it gave nothing
    # CPU: instruction pointers sampled by the trusted worker in each candidate batch (evaluation/own_code)
    samples: int = 0
    sampled_shares: dict[str, float] = field(default_factory=dict)  # own, torch, glue, other
    top_files: list[tuple[str, float]] = field(default_factory=list)  # (file, share of the samples)
    # GPU, launch_evidence: the launches seen from outside the candidate, by kind and phase, over every batch
    # (gpu_evidence.GpuLaunchEvidence.summary)
    launches: dict = field(default_factory=dict)


@dataclass
class EvalResult:
    task_id: str
    backend: str
    size: str
    verdict: Verdict
    # kernelgym.evaluation.rules.Reason: read .rule, not the text
    reasons: list[str] = field(default_factory=list)
    static: StaticResult | None = None
    build: BuildResult | None = None
    load: LoadResult | None = None
    correctness: CorrectnessResult | None = None
    timing: TimingResult | None = None
    profile: ProfileResult | None = None
    output_tail: str = ""  # the candidate's captured stdout/stderr, bounded
    wall_s: float = 0.0
    stage_s: dict[str, float] = field(default_factory=dict)  # wall seconds per stage, where the time went
    # shapes="heldout": the drawn constants of each held-out shape checked, and whether it passed
    heldout_shapes: list[dict] | None = None
    # the candidate's processes killed at its tree's memory limit: its own failure, never the host's
    candidate_oom_kills: int = 0

    @property
    def ok(self) -> bool:
        return self.verdict is Verdict.OK

    @property
    def compiled(self) -> bool:
        return self.build is not None and self.build.compiled

    @property
    def correct(self) -> bool:
        return self.correctness is not None and self.correctness.passed and self.verdict is Verdict.OK

    @property
    def speedup(self) -> float | None:
        return self.timing.speedup if self.timing and self.timing.available and self.ok else None

    @property
    def verified_speedup(self) -> float | None:
        """The speedup, only when it is verified (correct, interval above the threshold); else None."""
        return self.speedup if self.timing is not None and self.timing.verified else None

    @property
    def runtime_ms(self) -> float | None:
        return self.timing.candidate.median_ms if self.timing and self.timing.candidate else None

    @property
    def ref_runtime_ms(self) -> float | None:
        return self.timing.reference.median_ms if self.timing and self.timing.reference else None

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["verdict"] = self.verdict.value
        data.update(
            compiled=self.compiled, correct=self.correct, speedup=self.speedup, runtime_ms=self.runtime_ms,
            ref_runtime_ms=self.ref_runtime_ms,
        )
        return _finite(data)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalResult:
        def build(kind, value):
            return None if value is None else kind(**value)

        corr = data.get("correctness")
        timing = data.get("timing")
        profile = data.get("profile")
        return cls(
            task_id=data["task_id"], backend=data["backend"], size=data["size"],
            verdict=Verdict(data["verdict"]), reasons=[_reason(r) for r in data.get("reasons", [])],
            static=build(StaticResult, data.get("static")),
            build=build(BuildResult, data.get("build")), load=build(LoadResult, data.get("load")),
            correctness=None if corr is None else CorrectnessResult(
                passed=corr["passed"], atol=corr["atol"], rtol=corr["rtol"],
                trials=[TrialResult(**t) for t in corr.get("trials", [])],
            ),
            timing=None if timing is None else TimingResult(**{
                **timing,
                "candidate": build(TimingStats, timing.get("candidate")),
                "reference": build(TimingStats, timing.get("reference")),
            }),
            profile=None if profile is None else ProfileResult(**{
                **profile, "top_ops": [tuple(op) for op in profile.get("top_ops", [])],
                "top_files": [tuple(f) for f in profile.get("top_files", [])],
                "kernels": [KernelMetrics(**k) for k in profile.get("kernels", [])],
            }),
            output_tail=data.get("output_tail", ""), wall_s=data.get("wall_s", 0.0),
            stage_s=dict(data.get("stage_s", {})), heldout_shapes=data.get("heldout_shapes"),
            candidate_oom_kills=int(data.get("candidate_oom_kills", 0)),
        )


def _reason(text: str) -> Reason:
    return Reason.parse(text)


def _finite(value: Any) -> Any:
    """JSON has no NaN/Inf: make them strings so a result always serializes."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value
