"""One batch as the worker runs it (evaluation/batch.py): the CPU time charged to the candidate is counted
only while its tree is stopped and every thread has been charged its last slice."""

from __future__ import annotations

import time

from kernelgym.evaluation import state
from kernelgym.evaluation.options import EvalOptions
from kernelgym.evaluation.pipeline import Pipeline
from kernelgym.evaluation.result import Verdict
from kernelgym.solutions import examples
from kernelgym.tasks import bundled
from kernelgym.workers.pool import make_job
from kernelgym.workers.procfs import off_run_queue, stat_fields, threads_of
from kernelgym.workers.sandbox import SandboxConfig


def test_the_candidates_cpu_count_is_read_only_while_its_tree_is_stopped(tmp_path, monkeypatch):
    """A cgroup's count lacks a running thread's time since its last scheduler tick (4 ms here). It was
    read just after the thaw that starts a candidate's batch: in CI an honest ReLU timed in one batch then
    read 1.45 cores and was judged `extra_cores`. Every read now finds the tree stopped and off its CPUs."""
    reads: list[list[tuple[str, bool]]] = []
    count = state.Evaluation.candidate_cpu_s

    def spied(ev):
        if ev.candidate is not None and ev.stage == "timing":
            threads = [tid for pid in ev.candidate.tree() if pid not in ev.candidate.helpers
                       for tid in threads_of(pid)]
            reads.append([((stat_fields(tid) or ["X"])[0], off_run_queue(tid)[0]) for tid in threads])
        return count(ev)

    monkeypatch.setattr(state.Evaluation, "candidate_cpu_s", spied)
    source = next(e for e in examples("cpp") if e.task_id.endswith("L1/1_ReLU")).source
    source = source.replace('r"""', f'r"""\n// fresh {time.time_ns()}\n', 1)
    options = EvalOptions(timing_trials=4, timing_precision=0.0, confirm_verified=False)
    job = make_job(bundled().get("L1/1_ReLU"), source, "cpp", "cpu", options, False)
    result = Pipeline(str(tmp_path), SandboxConfig(), has_gpu=False).run(job)
    assert result.verdict is Verdict.OK, result.reasons
    assert len(reads) >= 2 * 5, len(reads)  # before and after each candidate run: warm-up and 4 timed
    running = [threads for threads in reads if any(s not in ("T", "t") for s, _ in threads)]
    assert not running, running
    if not result.static.warnings:  # a cgroup was made (root, as on CI): the reads waited until charged
        assert all(off for threads in reads for _, off in threads), reads
