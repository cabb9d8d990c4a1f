"""A worker whose own process touched the CUDA driver is replaced, and the evaluation it spoiled runs
again."""

from pathlib import Path

from kernelgym.evaluation.result import EvalResult, Verdict
from kernelgym.workers import pool as pool_mod
from kernelgym.workers.pool_faults import spoiled


def test_only_the_judge_s_own_failure_spoils_a_worker():
    judge_failed = EvalResult("t", "cuda", "gpu", Verdict.INFRASTRUCTURE_ERROR, [
        "judge_failed: the worker's own process initialized CUDA"])
    assert spoiled(judge_failed)
    assert not spoiled(EvalResult("t", "cuda", "gpu", Verdict.CRASH,
                                  ["cuda_error: illegal memory access"]))


def test_the_pool_judges_a_spoiled_evaluation_again_in_a_fresh_worker(monkeypatch, relu_task, relu_solution):
    with pool_mod.EvalPool(workers=1, gpu=False, infra_backoff_s=0.0) as pool:
        worker = pool._workers[0]
        real_run = worker.run
        calls = []

        def run_once_spoiled(job):
            calls.append(job.task_id)
            if len(calls) == 1:
                worker.stop()  # what run() does after a spoiled answer
                return EvalResult(job.task_id, job.backend, job.size, Verdict.INFRASTRUCTURE_ERROR,
                                  ["judge_failed: the worker's own process initialized CUDA"])
            return real_run(job)

        monkeypatch.setattr(worker, "run", run_once_spoiled)
        result = pool.evaluate(relu_task, relu_solution, backend="cpp")
    assert len(calls) == 2
    assert result.verdict is Verdict.OK, result.reasons


def test_workers_check_cuda_through_nvml_so_forks_stay_usable(relu_task, relu_solution):
    with pool_mod.EvalPool(workers=1, gpu=False) as pool:
        pool.evaluate(relu_task, relu_solution, backend="cpp")
        pid = pool._workers[0].process.pid
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    assert b"PYTORCH_NVML_BASED_CUDA_CHECK=1" in env


def test_what_the_static_stage_rejects_is_answered_without_starting_a_worker(relu_task):
    """A syntax error, a module without ModelNew or without a kernel needs no process: the pool answers it
    itself, with the pipeline's own verdict and reason (an RL batch's broken replies cost nothing)."""
    with pool_mod.EvalPool(workers=1, gpu=False) as pool:
        broken = pool.evaluate(relu_task, "class ModelNew(:\n", backend="cpp")
        no_model = pool.evaluate(relu_task, "import torch\n", backend="cpp")
        as_cpp = pool.evaluate(relu_task, "#include <torch/extension.h>\nint x;\n", backend="cpp")
        assert pool._workers[0].process is None  # no worker was ever started
    assert broken.verdict is Verdict.COMPILE_ERROR and broken.reasons[0].rule == "syntax_error"
    assert broken.static is not None and not broken.static.passed
    assert no_model.reasons[0].rule == "no_model_new"
    assert "a solution is a Python module that defines ModelNew" in str(as_cpp.reasons[0])


def test_one_candidate_at_a_time_reuses_the_started_worker(relu_task, relu_solution):
    """Idle workers are handed out last in, first out: a caller that evaluates one candidate at a time never
    waits for another worker to start (about 6 s a worker on the H200)."""
    with pool_mod.EvalPool(workers=2, gpu=False) as pool:
        for _ in range(2):
            assert pool.evaluate(relu_task, relu_solution, backend="cpp").verdict is Verdict.OK
        assert pool._workers[0].process is not None or pool._workers[1].process is not None
        assert pool._workers[0].process is None or pool._workers[1].process is None


def test_a_prestarted_pool_starts_every_worker_before_any_evaluation():
    with pool_mod.EvalPool(workers=2, gpu=False, prestart=True) as pool:
        started = [pool._idle.get(timeout=120) for _ in range(2)]
        assert all(w.process is not None and w.process.poll() is None for w in started)
        for worker in started:
            pool._idle.put(worker)
