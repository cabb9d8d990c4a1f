"""Stage 4, correctness: fresh input sets (the last ones perturbed) through both processes, every call's
outputs checked by the reference; the solution's own kernels must have run."""

from __future__ import annotations

import time

from kernelgym.evaluation import rules
from kernelgym.evaluation.batch import require_own_kernels, run_batch
from kernelgym.evaluation.batch_size import calls_that_fit, check_fits
from kernelgym.evaluation.outcome import Mismatch, end
from kernelgym.evaluation.result import CorrectnessResult, TrialResult
from kernelgym.evaluation.state import Evaluation


def correctness(ev: Evaluation) -> None:
    ev.stage = "correctness"
    started = time.monotonic()
    n = ev.options.correctness_trials
    perturbed = [i >= n - ev.options.perturbed_trials and ev.job.perturb != "none" for i in range(n)]
    result = CorrectnessResult(passed=False, atol=ev.atol, rtol=ev.rtol)
    ev.result.correctness = result
    check_fits(ev, per_batch=1)
    seeds, per_batch = ev.seeds(n), calls_that_fit(ev, n, share=0.8)
    for first in range(0, n, per_batch):  # shipped-size tasks: as many sets at once as the device holds
        chunk = slice(first, first + per_batch)
        try:
            record = run_batch(ev, seeds[chunk], perturbed[chunk])
        except Mismatch as mismatch:
            call = first + mismatch.call
            trial = mismatch.trial
            trial.index, trial.perturbed = call, perturbed[call]
            result.trials.append(trial)
            raise end(rules.INCORRECT, _failed_trial(call, n, first, trial)) from None
        require_own_kernels(ev, record)
        if first == 0:
            ev.first_batch = record
    result.trials = [TrialResult(i, perturbed[i], True) for i in range(n)]
    result.passed = True
    ev.result.stage_s["correctness"] = round(time.monotonic() - started, 3)



def _failed_trial(call: int, n: int, first: int, trial: TrialResult) -> str:
    """The failure as the agent reads it. A batch's calls are checked last first (work left in flight at
    'done' shows in the last one), so the earlier trials of that batch were not looked at: saying so keeps
    an agent from reading 'trial 5' as 'trials 1-4 passed' and hunting an edge case."""
    which = " (perturbed inputs)" if trial.perturbed else ""
    said = f"trial {call + 1} of {n}{which}: {trial.message}"
    if call > first:
        said += f"; {_trials(first, call)} not checked (a batch's last call is checked first)"
    if first > 0:
        said += f"; {_trials(0, first)} passed"
    return said


def _trials(start: int, stop: int) -> str:
    """Trials start..stop-1 (0-based) as the agent counts them."""
    return f"trial {start + 1}" if stop - start == 1 else f"trials {start + 1}-{stop}"
