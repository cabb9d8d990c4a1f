"""Stage 6 on the CPU, own code: whether the solution's own compiled code did the work, from the instruction
pointers the worker sampled in every batch of the candidate (evaluation/own_code.py classifies them)."""

from __future__ import annotations

from kernelgym.evaluation import own_code as sampled_code
from kernelgym.evaluation import rules
from kernelgym.evaluation.code_kinds import OWN
from kernelgym.evaluation.outcome import end
from kernelgym.evaluation.result import ProfileResult
from kernelgym.evaluation.state import Evaluation


def own_code(ev: Evaluation) -> bool:
    """Whether the solution's own compiled code did the work, from the instruction pointers sampled in
    every candidate batch by this process (nothing the candidate reports is used). False when the
    samples are too few to decide: they are kept in the result, and the in-process profile decides."""
    evidence = ev.watch.evidence
    ev.result.profile = ProfileResult(
        coverage=round(evidence.share(OWN), 4),
        own_kernel_calls=ev.first_batch.own_kernel_calls,
        samples=evidence.total, sampled_shares=evidence.summary(), top_files=evidence.top_paths(),
        top_ops=evidence.top_torch_ms())
    ev.result.static.warnings.extend(f"own code: {note}" for note in ev.watch.own_images.notes)
    if not sampled_code.decides(evidence, ev.options.max_torch_share):
        ev.result.static.warnings.append(f"own code: {evidence.total} samples, too few to decide; "
                                         "the in-process profile decided")
        return False
    found = sampled_code.judge(evidence, ev.options.max_torch_share)
    if found is not None:
        rule, message = found
        raise end(rules.TORCH_COMPUTE if rule == "torch" else rules.UNTRACKED_COMPUTE, message)
    return True
