"""A GPU worker's next reference and candidate processes, started before their job.

A fresh process's CUDA context costs about half a second, and each evaluation needs two (its reference and its
candidate). A worker therefore forks the next pair as soon as it takes the last one: each enters its sandbox,
makes its context and waits, while the worker judges. A spare runs nothing of any solution before its job
arrives, and it serves one evaluation only, as a freshly forked process would. A CPU candidate's cgroup is
made when the pair is taken, and the pair moved into it then, before any of its code runs.

A GPU pair starts on any of the worker's cores and is pinned to its evaluation's cores when taken: started on
those cores, its two CUDA contexts (about a second of CPU) competed with the evaluation under way there, and
on the H100 the timing stage of a warm evaluation took 2-4 s instead of 0.5 s
(benchmarks/results/judge_speed/cold_build_gpu.md).
A CPU pair is pinned from its start: the worker judges a CPU candidate by the cores its threads last ran on.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass

from kernelgym.workers.candidate_side import run_candidate
from kernelgym.workers.process import EvalProcess
from kernelgym.workers.procfs import pin_threads
from kernelgym.workers.reference_side import run_reference
from kernelgym.workers.sandbox import SandboxConfig


@dataclass
class SparePair:
    folder: str  # holds reference/ and candidate/, each process's own folder; removed with the evaluation
    cores: frozenset[int]
    reference: EvalProcess
    candidate: EvalProcess

    def discard(self) -> None:
        for process in (self.candidate, self.reference):
            process.close()
        shutil.rmtree(self.folder, ignore_errors=True)


class Spares:
    """At most one pair waiting, for the cores the worker's evaluations use."""

    def __init__(self, work_root: str, sandbox: SandboxConfig, uses_gpu: bool):
        self.work_root, self.sandbox, self.uses_gpu = work_root, sandbox, uses_gpu
        self.waiting: SparePair | None = None

    def take(self, cores: set[int]) -> SparePair | None:
        """The waiting pair if it suits and both processes live (the caller then assigns their jobs)."""
        pair, self.waiting = self.waiting, None
        if pair is not None and pair.cores == frozenset(cores) and pair.reference.alive() \
                and pair.candidate.alive() and (not self.uses_gpu or _pin(pair, cores)):
            return pair
        if pair is not None:
            pair.discard()
        return None

    def refill(self, cores: set[int]) -> None:
        if self.waiting is not None:
            return
        folder = tempfile.mkdtemp(prefix="spare-", dir=self.work_root)
        processes = []
        for target, name in ((run_reference, "reference"), (run_candidate, "candidate")):
            path = f"{folder}/{name}"
            os.mkdir(path)
            processes.append(EvalProcess(target, None, path, self.sandbox, self.uses_gpu,
                                         cores=None if self.uses_gpu else cores))
        self.waiting = SparePair(folder, frozenset(cores), *processes)

    def close(self) -> None:
        if self.waiting is not None:
            self.waiting.discard()
            self.waiting = None


def _pin(pair: SparePair, cores: set[int]) -> bool:
    """Both trees onto the evaluation's cores; nothing of the job has run yet."""
    return pin_threads(lambda: pair.reference.tree() + pair.candidate.tree(), cores)
