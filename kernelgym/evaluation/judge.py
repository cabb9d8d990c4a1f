"""One evaluation, its stages top to bottom (each in evaluation/stages/, a file of its own):

static -> reference start -> candidate load -> correctness -> timing -> own code (CPU) or profile -> ncu

(On a GPU with launch_evidence, the launches watched in every batch decide the own code in the profile
stage, or alone where it does not run: evaluation/launch_evidence.py.)

A stage returns, or ends the evaluation by raising a finding (evaluation/outcome.py); the pipeline turns
that into the verdict. Whatever happens, both processes are ended before this returns.
"""

from __future__ import annotations

from kernelgym.evaluation import launch_evidence
from kernelgym.evaluation.job import EvalJob
from kernelgym.evaluation.machine import Machine
from kernelgym.evaluation.result import EvalResult, TimingResult, Verdict
from kernelgym.evaluation.stages.correctness import correctness
from kernelgym.evaluation.stages.load import load_beside_reference
from kernelgym.evaluation.stages.ncu import ncu
from kernelgym.evaluation.stages.own_code import own_code
from kernelgym.evaluation.stages.profile import profile
from kernelgym.evaluation.stages.reference import start_reference
from kernelgym.evaluation.stages.static import static
from kernelgym.evaluation.stages.timing import no_timing_reason, timing
from kernelgym.evaluation.state import Evaluation


def evaluate(machine: Machine, job: EvalJob, result: EvalResult, eval_dir: str, seeds=None) -> None:
    """Fills `result` with one evaluation's stages; raises Outcome where a stage ends it. seeds: a replay's
    seed source (machine.ReplayedSeeds), else fresh hidden seeds."""
    ev = Evaluation(machine, job, result, eval_dir, seeds)
    try:
        static(ev)
        start_reference(ev)
        load_beside_reference(ev)
        correctness(ev)
        if ev.options.timing and ev.mode == "run":
            timing(ev)
        else:
            result.timing = TimingResult(False, reason=no_timing_reason(ev.mode, ev.options))
        if ev.watch.evidence.note:  # perf events refused: say so, and what decided instead
            result.static.warnings.append(ev.watch.evidence.note)
        decided = ev.watch.judges_own_code() and own_code(ev)
        if not decided and ev.options.profile and ev.mode == "run":
            profile(ev)
        elif ev.gpu_evidence is not None and ev.mode == "run":  # no profile: the launches decide alone
            launch_evidence.decide(result, ev.gpu_evidence, None)
    finally:
        ev.close()
    if ev.options.ncu and result.verdict is Verdict.OK:
        ncu(ev)
