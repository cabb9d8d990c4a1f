"""Faults of the judge are never the candidate's: a dead worker, a pipeline that reports
`infrastructure_error` or a full disk make the pool judge again on a fresh worker, and at worst answer
"not judged"."""

import os
import signal
import time

import pytest

from kernelgym.evaluation.result import EvalResult, Verdict
from kernelgym.workers.pool import EvalPool


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow  # two worker starts and two evaluations: about 15 s alone, more on a busy machine
def test_a_worker_killed_mid_evaluation_gives_the_verdict_of_an_unharmed_run(relu_task, relu_solution):
    with EvalPool(workers=1, gpu=False, infra_backoff_s=0.1) as pool:
        unharmed = pool.evaluate(relu_task, relu_solution, backend="cpp")
        future = pool.submit(relu_task, relu_solution, backend="cpp")
        worker = pool._workers[0]
        deadline = time.monotonic() + 120
        victim = None
        while victim is None and not future.done() and time.monotonic() < deadline:
            process = worker.process
            # Mid-evaluation: the worker has forked the reference (and candidate) process of this job.
            orphans = _children(process.pid) if process is not None else []
            if orphans:
                victim = process.pid
            else:
                time.sleep(0.005)
        assert victim is not None, "the evaluation ended before the worker could be killed during it"
        os.kill(victim, signal.SIGKILL)
        killed = future.result(timeout=300)
        stats = pool.infra
        leftovers = [p for p in orphans if _alive(p)]
        stale = [n for n in os.listdir(os.path.join(pool.work_root, "worker-0")) if n.startswith("eval-")]
    assert unharmed.verdict is Verdict.OK, unharmed.reasons
    assert killed.verdict is unharmed.verdict, killed.reasons
    assert killed.correct
    assert stats.rejudged == 1 and stats.causes["worker_crash"] == 1 and stats.not_judged == 0
    said = "judged again after the judge's fault: worker_crash"
    assert any(w.startswith(said) for w in killed.static.warnings), killed.static.warnings
    assert not any("judged again" in w for w in unharmed.static.warnings)
    assert leftovers == [] and stale == []  # what the dead worker left running, and its folder, are gone


def test_the_pipeline_s_infrastructure_error_is_judged_again_then_reported_not_judged(
    monkeypatch, relu_task, relu_solution
):
    with EvalPool(workers=1, gpu=False, infra_retries=2, infra_backoff_s=0.0) as pool:
        worker = pool._workers[0]
        calls = []

        def reference_died(job):
            calls.append(job.task_id)
            return EvalResult(
                job.task_id,
                job.backend,
                job.size,
                Verdict.INFRASTRUCTURE_ERROR,
                ["reference_crashed: killed by signal SIGKILL"],
            )

        monkeypatch.setattr(worker, "run", reference_died)
        result = pool.evaluate(relu_task, relu_solution, backend="cpp")
        stats = pool.infra
    assert len(calls) == 3  # the first run and two re-runs
    assert result.verdict is Verdict.INFRASTRUCTURE_ERROR
    assert stats.rejudged == 2 and stats.not_judged == 1 and stats.causes["reference_crashed"] == 3


def test_a_full_disk_is_never_charged_to_the_candidate(monkeypatch, relu_task, relu_solution):
    with EvalPool(
        workers=1, gpu=False, infra_retries=1, infra_backoff_s=0.0, min_free_disk_mb=1 << 40
    ) as pool:
        worker = pool._workers[0]
        calls = []
        monkeypatch.setattr(
            worker,
            "run",
            lambda job: (
                calls.append(job)
                or EvalResult(
                    job.task_id,
                    job.backend,
                    job.size,
                    Verdict.COMPILE_ERROR,
                    ["compile_error: No space left on device"],
                )
            ),
        )
        result = pool.evaluate(relu_task, relu_solution, backend="cpp")
        stats = pool.infra
    assert calls == []  # nothing runs on a full disk
    assert result.verdict is Verdict.INFRASTRUCTURE_ERROR
    assert stats.causes["disk_full"] == 2 and stats.not_judged == 1


def test_the_sweep_kills_only_what_its_worker_forked():
    import subprocess

    from kernelgym.workers.pool_worker import kill_if_same
    from kernelgym.workers.worker import start_time

    kill_if_same(1, start_time(1), 0)  # pid 1 (e.g. a pid noted from inside a PID namespace): never
    kill_if_same(os.getpid(), start_time(os.getpid()), 0)  # this process: never
    ours = subprocess.Popen(["sleep", "30"])  # in this process's group: it alone, never the group
    theirs = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        kill_if_same(ours.pid, start_time(ours.pid), 0)
        assert ours.wait(timeout=10) == -signal.SIGKILL
        started = start_time(theirs.pid)
        kill_if_same(theirs.pid, started, int(started) + 1)  # older than the worker: not its child
        kill_if_same(theirs.pid, str(int(started) + 1), 0)  # another start time: the pid was reused
        assert theirs.poll() is None
        os.kill(theirs.pid, signal.SIGSTOP)  # frozen, as the worker leaves a candidate it reads
        kill_if_same(theirs.pid, started, 0)
        assert theirs.wait(timeout=10) == -signal.SIGKILL
    finally:
        for p in (ours, theirs):
            p.kill()
            p.wait()


TREE_BLOWS_ITS_LIMIT = '''
import os, time, torch
from kernelgym.kernels import load_cpp

_lib = load_cpp(r"""
#include <cstdint>
extern "C" void relu(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0 ? x[i] : 0;
}
""")


class ModelNew(torch.nn.Module):
    def forward(self, x):
        children = []
        for _ in range(2):  # a tree of children, each under the per-process limit, together over the tree's
            pid = os.fork()
            if pid == 0:
                block = bytearray(300 << 20)
                time.sleep(3)
                os._exit(len(block) & 0)
            children.append(pid)
        if any(os.WIFSIGNALED(os.waitpid(pid, 0)[1]) for pid in children):
            raise RuntimeError("a helper process died")
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.relu(x, y, x.numel())
        return y
'''


def test_a_tree_killed_at_its_own_memory_limit_is_the_candidate_s_failure(relu_task):
    """A red team's route to an unpaid retry: children that each stay under the per-process limit exhaust
    the host, and a host OOM kill during a failed evaluation was read as the judge's failure. The tree now
    has one limit (where a memory cgroup can be made) and its own kills are the candidate's."""
    from kernelgym.workers.cgroup import CandidateCgroup
    from kernelgym.workers.pool import PoolConfig
    from kernelgym.workers.sandbox import SandboxConfig

    probe, why = CandidateCgroup.create({0}, 256 << 20)
    if probe is not None:
        probe.remove()
    if probe is None or not probe.oom_file:
        assert os.geteuid() != 0 or not os.path.isdir("/sys/fs/cgroup/memory"), why
        pytest.skip(f"no memory cgroup here: {why}")
    config = PoolConfig(workers=1, gpu=False, sandbox=SandboxConfig(tree_memory_limit_mb=450),
                        infra_backoff_s=0.1)
    with EvalPool(config=config) as pool:
        result = pool.evaluate(relu_task, TREE_BLOWS_ITS_LIMIT, backend="cpp")
    assert result.verdict in (Verdict.RUNTIME_ERROR, Verdict.CRASH), result.reasons
    assert result.candidate_oom_kills >= 1
    assert "memory limit" in str(result.reasons[-1]), result.reasons
    assert pool.infra.not_judged == 0 and not pool.infra.causes
