"""What one evaluation holds while its stages run, in kernelgym's trusted worker: the job, the result being
filled, the two evaluation processes, and what the stages hand on to each other. Each stage is a function
of it (evaluation/stages/), run in order by evaluation/judge.py.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field

from kernelgym import backends
from kernelgym.evaluation.compare import tolerance
from kernelgym.evaluation.contention import SideContention
from kernelgym.evaluation.gpu_evidence import GpuLaunchEvidence
from kernelgym.evaluation.job import EvalJob
from kernelgym.evaluation.launch_watch import EvaluationLaunchWatch
from kernelgym.evaluation.machine import Machine, seed_source
from kernelgym.evaluation.own_code import CandidateWatch
from kernelgym.evaluation.result import EvalResult
from kernelgym.workers import messages as m
from kernelgym.workers.process import EvalProcess
from kernelgym.workers.readback import Readback

BATCH_PARTS = ("inputs", "map", "run", "check")


@dataclass
class Batch:
    """One batch as the trusted side saw it."""

    number: int
    calls: int
    reference_ms: float = 0.0  # wall time of the reference's batch, by the worker's clock
    candidate_ms: float = 0.0
    candidate_cpu_s: float = 0.0
    own_kernel_calls: int = 0  # the candidate's own count: a hint in messages, never evidence
    backward_kernel_calls: int = -1
    profile: dict = field(default_factory=dict)
    cpu_ns_exact: bool = False  # candidate_cpu_s came from its cgroup (every thread, to the ns)


@dataclass
class Prepared:
    """A batch's input sets made by the reference ahead of its turn (before the GPU's slot is taken)."""

    number: int
    seeds: list[int]
    inputs: m.Inputs
    fd: int | None


class Evaluation:
    """One evaluation's state; the stages read and fill it."""

    def __init__(self, machine: Machine, job: EvalJob, result: EvalResult, eval_dir: str, seeds=None):
        self.machine, self.job, self.result, self.eval_dir = machine, job, result, eval_dir
        self.options = job.options
        self.backend = backends.get(job.backend)
        self.device, self.mode = machine.placement(self.backend)
        self.rng = seeds or seed_source(self.options)  # seeds: a replay's (machine.ReplayedSeeds)
        self.child_job = machine.child_job(job, self.device, self.mode, self.rng)
        if seeds is not None:  # a replay: its fresh processes must not hide a read of unwritten memory
            self.child_job.fill_new_memory = True
        self.atol, self.rtol = tolerance(job.dtype, job.atol, job.rtol)
        self.reference: EvalProcess | None = None
        self.candidate: EvalProcess | None = None
        self.ready: m.Ready | None = None
        self.readback = Readback() if self.device == "cpu" else None
        self.batches = 0
        self.prepared: list[Prepared] = []  # the timing's first batches' inputs, made before its slot
        self.past_clock_ms = 0.0  # CPU: timed batches' work charged past their clocks
        self.spare_folder: str | None = None  # where processes started before this job live
        # Seconds of every batch's parts so far (inputs made, inputs mapped, both sides run, outputs checked):
        # the timing stage reports its own share, which is what holds the GPU's slot.
        self.batch_parts_s = dict.fromkeys(BATCH_PARTS, 0.0)
        self.build_s, self.cached = 0.0, True
        self.stage = "load"  # the stage under way, named in timeouts and crashes
        self.cores = machine.evaluation_cores(self.device, self.options.threads)  # both processes' cores
        # issue 28: the candidate's cgroup and the samples of its batches, taken from outside
        self.watch = CandidateWatch(self.device == "cpu", native=self.backend.device == "cpu")
        # GPU, launch_evidence: every kernel launch of each side, watched from outside (evaluation/
        # launch_evidence.py); the candidate's own files are the classifier's set, which grows as builds
        # are served
        self.launch_watch: EvaluationLaunchWatch | None = None
        self.reference_launch_watch: EvaluationLaunchWatch | None = None
        self.gpu_evidence: GpuLaunchEvidence | None = None
        if self.device == "cuda" and self.options.launch_evidence:
            self.launch_watch = EvaluationLaunchWatch(self.watch.classifier.own)
            self.reference_launch_watch = EvaluationLaunchWatch(set())
            self.gpu_evidence = GpuLaunchEvidence()
        # CPU, each side's while the timing's batches are clocked (issue 47)
        self.contention: dict[str, SideContention] = {}
        # what the stages hand on: the reference's init arguments (start_reference), the correctness's first
        # batch (the timing sizes its batches by it), the GPU's readback lag (the timing reports it)
        self.init_args = None
        self.first_batch: Batch | None = None
        self.readback_lag_ms: float | None = None
        self.done_at = 0  # perf_counter_ns when the candidate's last batch answered
        self.reference_deadline = 0.0  # monotonic: the reference answers by then (start_reference sets it)

    def seeds(self, n: int) -> list[int]:
        return [self.rng.randrange(2**31) for _ in range(n)]

    def candidate_pids(self) -> list[int]:
        return [pid for pid in self.candidate.tree() if pid not in self.candidate.helpers]

    def candidate_cpu_s(self) -> float:
        """The candidate tree's CPU time so far: its cgroup's (to the ns, exited threads included), or the
        sum of its live processes' /proc/PID/stat (clock ticks) where no cgroup could be made."""
        if self.device != "cpu":
            return 0.0
        return self.watch.cpu_ns() / 1e9 if self.watch.cgroup is not None else self.candidate.cpu_seconds()

    def close(self) -> None:
        """Both processes ended and what they left collected (their output, the candidate's OOM kills)."""
        for process in (self.candidate, self.reference):
            if process is not None:
                process.close()
        if self.readback is not None:
            self.readback.close()
        self.result.candidate_oom_kills = self.watch.oom_kills()
        self.watch.close()
        for launch_watch in (self.launch_watch, self.reference_launch_watch):
            if launch_watch is not None:
                launch_watch.close(wait=False)  # the processes are gone: nothing is watched any more
        if self.candidate is not None:
            self.result.output_tail = self.candidate.output_tail()
        if self.spare_folder:
            shutil.rmtree(self.spare_folder, ignore_errors=True)
