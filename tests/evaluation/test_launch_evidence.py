"""The GPU launch evidence as the judge uses it (evaluation/launch_evidence.py), without CUDA: each batch
taken once it is done (the reference's thrown away), the phase each batch counts as, and the verdict the
profile stage reaches from the evidence and the in-process hint: a finding, an `ok` that stays verified, or
an `ok` whose speedup is not verified."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kernelgym.errors import ConfigError
from kernelgym.evaluation import rules
from kernelgym.evaluation.gpu_evidence import (
    OWN,
    PROFILED,
    TIMED,
    UNKNOWN,
    UNTIMED,
    VENDOR,
    BatchLaunches,
    GpuLaunchEvidence,
    launch_key,
)
from kernelgym.evaluation.launch_evidence import batch_phase, decide, take_batch, take_construction
from kernelgym.evaluation.options import EvalOptions
from kernelgym.evaluation.outcome import Outcome
from kernelgym.evaluation.result import EvalResult, StaticResult, TimingResult, Verdict

HINT = (rules.TORCH_COMPUTE, "forward left the heavy work to PyTorch (aten::mm)")
OWN_LAUNCH = launch_key(OWN, UNKNOWN)  # Triton's launcher: its own kernel, size not read
CUBLAS = launch_key(VENDOR, VENDOR)


def _batch(number: int, phase: str = TIMED, calls: int = 8, **counts: tuple) -> BatchLaunches:
    batch = BatchLaunches(number, phase, calls, batch_ms=2.0)
    for key, launches in counts.values():
        batch.add(key, launches)
    return batch


def _evidence(*extra: BatchLaunches, lost: int = 0, **counts: tuple) -> GpuLaunchEvidence:
    counts = counts or {"own": (OWN_LAUNCH, 8)}
    batches = [_batch(0, UNTIMED, calls=1, own=(OWN_LAUNCH, 1))]
    batches += [_batch(n, TIMED, **counts) for n in range(1, 6)] + [_batch(6, PROFILED, **counts)]
    batches[-1].lost = lost
    return GpuLaunchEvidence(True, batches=batches + list(extra))


def _result(verified: bool = True) -> EvalResult:
    result = EvalResult("L1/1_ReLU", "triton", "gpu", Verdict.OK)
    result.static = StaticResult(True)
    result.timing = TimingResult(True, device="cuda", speedup=1.8, speedup_ci_low=1.6, speedup_ci_high=2.0,
                                 verified=verified, round_trip_ms=0.2)
    return result


def test_complete_evidence_of_own_launches_keeps_the_speedup_verified():
    result = _result()
    decide(result, _evidence(), None)
    assert result.timing.verified and not result.reasons
    assert result.profile.launches["available"] and result.profile.launches["batches"] == 7
    assert result.profile.launches["launches"][TIMED] == {"own/own": 40}


def test_the_hint_adds_a_finding_to_clean_evidence():
    with pytest.raises(Outcome) as ended:
        decide(_result(), _evidence(), HINT)
    assert ended.value.finding.rule == "torch_compute" and "aten::mm" in ended.value.finding.message


def test_a_clean_hint_never_removes_a_finding_of_the_evidence():
    with pytest.raises(Outcome) as ended:
        decide(_result(), _evidence(own=(OWN_LAUNCH, 8), cublas=(CUBLAS, 8)), None)
    assert ended.value.finding.rule == "torch_compute"
    assert "vendor" in ended.value.finding.message


def test_a_timed_batch_without_own_launches_is_kernel_not_called():
    idle = _evidence()
    idle.batches[3] = _batch(3, TIMED, fill=(launch_key("torch", "torch_housekeeping"), 8))
    with pytest.raises(Outcome) as ended:
        decide(_result(), idle, None)
    assert ended.value.finding.rule == "kernel_not_called"


@pytest.mark.parametrize("evidence", [
    GpuLaunchEvidence(False, "uprobes refused (perf_event_paranoid)"),
    _evidence(lost=3),  # records the kernel dropped in a judged batch
    GpuLaunchEvidence(True, batches=[_batch(0, UNTIMED, own=(OWN_LAUNCH, 1))]),  # no timed batch watched
], ids=["refused", "records_lost", "no_timed_batch"])
def test_undecided_evidence_leaves_the_speedup_unverified(evidence):
    result = _result()
    decide(result, evidence, None)
    assert result.verdict is Verdict.OK and not result.timing.verified
    assert [r.rule for r in result.reasons] == ["own_code_unverified"]
    assert rules.RULES["own_code_unverified"].verdict is Verdict.OK  # informational
    assert any("not verifiable" in w for w in result.static.warnings)


def test_undecided_evidence_still_lets_the_hint_condemn():
    with pytest.raises(Outcome) as ended:
        decide(_result(), GpuLaunchEvidence(False, "refused"), HINT)
    assert ended.value.finding.rule == "torch_compute"


def test_undecided_evidence_without_a_timing_adds_no_reason():
    result = _result()
    result.timing = TimingResult(False, reason="timing disabled by the caller")
    decide(result, GpuLaunchEvidence(False, "refused"), None)
    assert not result.reasons and result.static.warnings


def test_each_batch_counts_by_its_stage():
    assert batch_phase(True, "profile") == PROFILED
    assert batch_phase(False, "timing") == TIMED  # the warm-up too
    assert batch_phase(False, "correctness") == UNTIMED


class _Watch:
    def __init__(self) -> None:
        self.takes: list[tuple] = []

    def take(self, number, phase, calls=1, batch_ms=None, tree_pids=()):
        self.takes.append((number, phase, calls, batch_ms, tuple(tree_pids)))
        return BatchLaunches(number, phase, calls, batch_ms=batch_ms)


def _evaluation(available: bool = True, stage: str = "timing") -> SimpleNamespace:
    return SimpleNamespace(launch_watch=_Watch(), reference_launch_watch=_Watch(), stage=stage,
                           gpu_evidence=GpuLaunchEvidence(available, "" if available else "refused"),
                           candidate_pids=lambda: [41, 42])


def test_takes_go_to_the_evidence_and_the_references_are_dropped():
    ev = _evaluation()
    take_construction(ev)
    take_batch(ev, 3, 8, 2.5, profiled=False)
    take_batch(ev, 4, 8, 2.4, profiled=True)
    assert [(b.number, b.phase) for b in ev.gpu_evidence.batches] == [(0, UNTIMED), (3, TIMED), (4, PROFILED)]
    assert ev.launch_watch.takes[1] == (3, TIMED, 8, 2.5, (41, 42))
    assert [t[0] for t in ev.reference_launch_watch.takes] == [3, 4]  # its cost only


def test_nothing_is_taken_where_the_watch_is_off_or_refused():
    off = SimpleNamespace(launch_watch=None, reference_launch_watch=None, gpu_evidence=None, stage="timing")
    take_construction(off)
    take_batch(off, 1, 8, 2.0, profiled=False)
    refused = _evaluation(available=False)
    take_batch(refused, 1, 8, 2.0, profiled=False)
    assert not refused.gpu_evidence.batches and not refused.launch_watch.takes


def test_launch_evidence_is_on_by_default_and_its_old_name_is_refused():
    assert EvalOptions().launch_evidence
    assert not EvalOptions(launch_evidence=False).launch_evidence
    with pytest.raises(ConfigError, match="unknown evaluation option.*launch_rules"):
        EvalOptions.from_kwargs(launch_rules=True)


def test_a_cpu_evaluation_never_watches_launches(pool, relu_task, relu_solution):
    """The option is for GPU evaluations: a cpp solution is judged as without it."""
    result = pool.evaluate(relu_task, relu_solution, backend="cpp", launch_evidence=True)
    assert result.verdict is Verdict.OK, result.reasons
    assert result.profile is not None and result.profile.launches == {}
    assert "own_code_unverified" not in [r.rule for r in result.reasons]
