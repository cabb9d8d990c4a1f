"""The reference timed alone, in its own (trusted) process: a baseline job (`baseline_only`, no candidate),
and the torch.compile baseline a timing is compared against. Both are cached per task and machine
fingerprint (evaluation/baselines.py)."""

from __future__ import annotations

import time

from kernelgym import backends
from kernelgym.evaluation import rules
from kernelgym.evaluation.job import EvalJob
from kernelgym.evaluation.machine import Machine, seed_source
from kernelgym.evaluation.outcome import end
from kernelgym.evaluation.result import EvalResult, TimingResult
from kernelgym.evaluation.rules import reason
from kernelgym.evaluation.timing import stats
from kernelgym.workers import locks
from kernelgym.workers.child import ChildJob
from kernelgym.workers.process import Died, EvalProcess


def baseline(machine: Machine, job: EvalJob, result: EvalResult, eval_dir: str) -> None:
    """A baseline job: the reference's eager time (and torch.compile's, if asked), from the cache or timed."""
    options = job.options
    device, mode = machine.placement(backends.get(job.backend))
    rng = seed_source(options)
    child_job = machine.child_job(job, device, mode, rng)
    child_job.trial_seeds = [rng.randrange(2**31) for _ in range(3)]
    child_job.perturbed = [False] * 3
    key = machine.baseline_key(job, device)
    eager_ms, compile_ms = machine.baselines.get("eager|" + key), machine.baselines.get(key)
    cached = eager_ms is not None and (compile_ms is not None or not options.compile_baseline)
    if not cached or options.refresh_baseline:
        child_job.compile_baseline = options.compile_baseline
        kind, meta = _time_reference_alone(machine, child_job, eval_dir, device,
                                           options.timeout_s + (300 if options.compile_baseline else 0))
        if kind == "timeout":
            raise end(rules.TIMEOUT, "timing the reference alone ran past its limit")
        if kind != "baseline":
            raise end(rules.REFERENCE_FAILED, str(meta.get("message", kind))[:300])
        eager_ms = stats(meta["eager_ms"]).median_ms
        machine.baselines.put("eager|" + key, eager_ms)
        if meta.get("compile_ms"):
            compile_ms = stats(meta["compile_ms"]).median_ms
            machine.baselines.put(key, compile_ms)
    result.reasons.append(reason(rules.BASELINE_ONLY,
                                 "the reference was timed, no candidate was evaluated"))
    result.timing = TimingResult(available=True, device=device, baseline="eager", compile_ms=compile_ms,
                                 compile_baseline_cached=cached and not options.refresh_baseline)
    result.timing.reference = stats([eager_ms])


def compile_baseline_ms(machine: Machine, job: EvalJob, device: str, mode: str,
                        eval_dir: str) -> tuple[float | None, bool]:
    """torch.compile of the reference, timed alone in the reference's own process; cached per task and
    fingerprint. (ms or None, whether it came from the cache)."""
    key = machine.baseline_key(job, device)
    cached = machine.baselines.get(key)
    if cached is not None:
        return cached, True
    rng = seed_source(job.options)
    child_job = machine.child_job(job, device, mode, rng)
    child_job.trial_seeds, child_job.perturbed = [rng.randrange(2**31) for _ in range(3)], [False] * 3
    child_job.compile_baseline = True
    kind, meta = _time_reference_alone(machine, child_job, eval_dir, device, job.options.timeout_s + 300)
    if kind != "baseline" or not meta.get("compile_ms"):
        return None, False
    machine.baselines.put("eager|" + key, stats(meta["eager_ms"]).median_ms)
    compile_ms = stats(meta["compile_ms"]).median_ms
    machine.baselines.put(key, compile_ms)
    return compile_ms, False


def _time_reference_alone(machine: Machine, child_job: ChildJob, eval_dir: str, device: str, limit_s: float):
    from kernelgym.workers import protocol
    from kernelgym.workers.baseline_side import run_baseline

    with locks.timing_slot(device):
        child = EvalProcess(run_baseline, child_job, eval_dir, machine.sandbox, device == "cuda")
        try:
            child.hello(time.monotonic() + 60)
            child.sock.settimeout(limit_s)
            kind, meta, _ = protocol.recv(child.sock)
            return kind, meta
        except (TimeoutError, OSError, protocol.ProtocolError, Died):
            return "timeout", {}
        finally:
            child.close()
