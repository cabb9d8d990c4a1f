"""The GPU launch evidence over one evaluation (EvalOptions.launch_evidence): the worker's launch watch on
the candidate from its construction to its end, one take after each of its batches, and the own-code
verdict the profile stage reaches from it (docs/gpu-own-code-wiring.md). Evaluation.close() closes the
watches.

The watch (evaluation/launch_watch.py) gathers, gpu_evidence.judge decides; the candidate's in-process
profile is a hint that can add a finding and never remove one. Evidence that could not be complete leaves
the speedup unverified (rule own_code_unverified). The reference is watched alike, its takes thrown away:
every probed launch traps into the kernel, and both sides pay for it the same way.
"""

from __future__ import annotations

from kernelgym.evaluation import gpu_evidence, rules
from kernelgym.evaluation.gpu_evidence import GpuLaunchEvidence
from kernelgym.evaluation.outcome import end
from kernelgym.evaluation.result import EvalResult, ProfileResult
from kernelgym.evaluation.rules import reason
from kernelgym.evaluation.state import Evaluation


def start(ev: Evaluation) -> None:
    """Both watches on, just before the candidate's construction (a CUDA graph captured in `__init__` is
    seen being captured). A refusal leaves the evidence unavailable: nothing is verified then."""
    if ev.launch_watch is None:
        return
    try:
        if not ev.launch_watch.start(ev.candidate.main_pid, ev.candidate_pids()):
            ev.gpu_evidence = GpuLaunchEvidence(False, ev.launch_watch.refused)
    except OSError as error:  # out of file descriptors, a kernel's answer not foreseen: evidence missing
        ev.launch_watch.close()
        ev.gpu_evidence = GpuLaunchEvidence(False, f"the launch watch could not start: {error}")
    try:
        ev.reference_launch_watch.start(ev.reference.main_pid)
    except OSError:
        ev.reference_launch_watch.close()


def take_construction(ev: Evaluation) -> None:
    """What the candidate launched while it was constructed, as batch 0 (untimed)."""
    if ev.launch_watch is not None and ev.gpu_evidence.available:
        ev.gpu_evidence.batches.append(ev.launch_watch.take(0, gpu_evidence.UNTIMED,
                                                            tree_pids=ev.candidate_pids()))


def take_batch(ev: Evaluation, number: int, calls: int, candidate_ms: float, profiled: bool) -> None:
    """Each side's launches since its last take, once a batch is done and checked: the candidate's as that
    batch's evidence; the reference's dropped."""
    if ev.launch_watch is None:
        return
    ev.reference_launch_watch.take(number, gpu_evidence.UNTIMED)
    if ev.gpu_evidence.available:
        phase = batch_phase(profiled, ev.stage)
        ev.gpu_evidence.batches.append(ev.launch_watch.take(number, phase, calls, batch_ms=candidate_ms,
                                                            tree_pids=ev.candidate_pids()))


def batch_phase(profiled: bool, stage: str) -> str:
    """How a batch counts: the profiled one; the timing stage's (its warm-up too: stricter, and it looks
    the same to the candidate); any other (correctness) untimed."""
    if profiled:
        return gpu_evidence.PROFILED
    return gpu_evidence.TIMED if stage == "timing" else gpu_evidence.UNTIMED


def decide(result: EvalResult, evidence: GpuLaunchEvidence, hint: tuple[rules.Rule, str] | None) -> None:
    """The GPU own-code verdict into `result`: the launches seen recorded; a finding (the evidence's, else
    the in-process hint's) ends the evaluation; evidence that cannot stand behind an `ok` leaves the
    speedup unverified."""
    timing = result.timing
    round_trip = (timing.round_trip_ms or 0.0) if timing is not None and timing.available else 0.0
    verdict = gpu_evidence.judge(evidence, hint, round_trip)
    if result.profile is None:
        result.profile = ProfileResult()
    result.profile.launches = evidence.summary()
    result.static.warnings.extend(verdict.notes)
    if verdict.finding is not None:
        raise end(*verdict.finding)
    if verdict.decided or timing is None or not timing.available:
        return
    timing.verified = False
    said = verdict.notes[0] if verdict.notes else "GPU launch evidence incomplete"
    said = said.removesuffix(": not verifiable")
    result.reasons.append(reason(rules.OWN_CODE_UNVERIFIED, f"{said}: the speedup is not verified"))
