"""The judge on the cpp backend: honest solutions pass, each kind of cheat gets no credit."""

import pytest

from kernelgym.evaluation.feedback import render_feedback
from kernelgym.evaluation.result import Verdict
from kernelgym.solutions import cheats, examples
from kernelgym.tasks import bundled

KERNEL = '''
import torch
import torch.nn as nn
from kernelgym.kernels import load_cpp

lib = load_cpp(r"""
#include <cstdint>
extern "C" void relu(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
extern "C" void relu_inplace(float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) x[i] = x[i] > 0.f ? x[i] : 0.f;
}
""")
'''

CHEATS = {
    "mutates_input": (KERNEL + '''
class ModelNew(nn.Module):
    def forward(self, x):
        lib.relu_inplace(x, x.numel())
        return x.view(x.shape)
''', Verdict.HACK, {"inputs_modified", "output_aliases_input"}),
    "returns_alias": (KERNEL + '''
class ModelNew(nn.Module):
    def forward(self, x):
        y = x.view(-1)
        return y.view(x.shape)
''', Verdict.HACK, {"output_aliases_input", "kernel_not_called"}),
    "constant_output": (KERNEL + '''
class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        lib.relu(torch.full_like(x, 0.5), y, x.numel())
        return y
''', Verdict.INCORRECT, {"incorrect"}),
    "stale_memory": (KERNEL + '''
class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        lib.relu(y, y, 0)
        return y
''', Verdict.INCORRECT, {"incorrect"}),
    "cache_by_shape": (KERNEL + '''
_cache = {}

class ModelNew(nn.Module):
    def forward(self, x):
        key = tuple(x.shape)
        if key not in _cache:
            y = torch.empty_like(x)
            lib.relu(x.contiguous(), y, x.numel())
            _cache[key] = y
        return _cache[key]
''', Verdict.INCORRECT, {"incorrect"}),
    "inherits_model": ('''
import torch.nn as nn
from kernelgym.kernels import load_cpp
lib = load_cpp("extern \\"C\\" void f() {}")

class Model(nn.Module):
    def forward(self, x):
        return x.relu()

class ModelNew(Model):
    pass
''', Verdict.HACK, {"inherits_reference"}),
    "patches_allclose": (KERNEL + '''
torch.allclose = lambda *a, **k: True

class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        lib.relu(x, y, 0)
        return y
''', Verdict.HACK, {"comparison_patch"}),
    # Writes that land after forward returned. A thread that happens to finish inside the clock did honest
    # work, timed (and whatever it ran past 'done' is charged: test_timing.py), so this one is made late.
    "background_thread": (KERNEL + '''
import threading, time

def late_relu(x, y):
    time.sleep(0.02)
    lib.relu(x, y, x.numel())

class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        threading.Thread(target=late_relu, args=(x, y)).start()
        return y
''', (Verdict.HACK, Verdict.INCORRECT), {"incorrect", "outputs_changed"}),
    "half_precision": (KERNEL + '''
class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        lib.relu(x.contiguous(), y, x.numel())
        return y.half().float()
''', Verdict.INCORRECT, {"incorrect"}),
}


@pytest.fixture(scope="module")
def relu():
    return bundled().get("L1/1_ReLU")


@pytest.mark.parametrize("name", sorted(CHEATS))
def test_cheats_get_no_credit(pool, relu, name):
    source, verdicts, rule_names = CHEATS[name]
    verdicts = verdicts if isinstance(verdicts, tuple) else (verdicts,)
    result = pool.evaluate(relu, source, backend="cpp")
    assert result.verdict in verdicts, (result.reasons, result.output_tail[-500:])
    assert any(r.rule in rule_names for r in result.reasons), result.reasons
    assert result.speedup is None and result.verified_speedup is None


def test_a_wrong_answer_says_which_trials_were_not_checked(pool, relu):
    """A batch's calls are checked last first: a reply wrong everywhere was told only 'trial 5 (perturbed
    inputs)', which reads as if trials 1-4 passed (a user pass's finding)."""
    result = pool.evaluate(relu, CHEATS["constant_output"][0], backend="cpp")
    message = next(r.message for r in result.reasons if r.rule == "incorrect")
    assert message.startswith("trial 5 of 5 (perturbed inputs): ")
    assert "trials 1-4 not checked" in message and "passed" not in message


def test_input_writes_stay_seen_when_the_pages_are_dropped(pool, relu):
    """Issue 43: ReLU in place in the input's pages, then MADV_DONTNEED and a read, left the input mapping
    showing the sealed file's pages again: judged ok (0.27x). The sandbox refuses the drop."""
    from pathlib import Path

    cheat = Path(__file__).parents[1] / "adversarial" / "cpp_inputs_written_then_dropped.py"
    result = pool.evaluate(relu, cheat.read_text(), backend="cpp")
    assert result.verdict is Verdict.HACK, (result.reasons, result.output_tail[-500:])
    assert result.reasons[0].rule == "inputs_modified"


def test_a_bug_on_inputs_correctness_missed_is_incorrect_not_hack(pool, relu):
    """Issue 43: an honest kernel with a NaN at a == b passed correctness, then a timed batch drew an a == b
    and the judge charged `outputs_changed` (hack). Here the kernel is wrong on one input in 8 (by bits
    of its first element): the same inputs run once more are wrong again, so it is `incorrect`."""
    source = KERNEL + '''
lib_bug = load_cpp(r"""
#include <cmath>
#include <cstdint>
#include <cstring>
extern "C" void relu_bug(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
    uint32_t bits;
    std::memcpy(&bits, x, 4);
    if (((bits >> 10) & 7) == 0) y[0] = NAN;  // the low bits of torch.rand * 2 - 1 are often 0
}
""")

class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        lib_bug.relu_bug(x.contiguous(), y, x.numel())
        return y
'''
    late = []
    for _ in range(8):  # correctness passes 5 draws in 2 evaluations of 3; the timing then draws hundreds
        result = pool.evaluate(relu, source, backend="cpp")
        assert result.verdict is Verdict.INCORRECT, (result.reasons, result.output_tail[-500:])
        late += [r.message for r in result.reasons if "wrong again" in r.message]
        if late:
            break
    assert late, "no evaluation reached the timing (the bug showed in correctness each time)"
    assert "first call of fresh processes" in late[0]
    assert result.correctness is not None and not result.correctness.passed


def test_a_read_of_an_unwritten_output_is_incorrect_not_hack(pool, relu):
    """Issue 43, on the GPU host: a reply that added into `torch.empty_like`'s memory (y += ...) was right on
    fresh zeroed pages and wrong on recycled ones, so it passed correctness, failed a later batch, was right
    again in the replay's fresh processes and was charged `hack` 6 times in 8. The replay's new memory is
    filled with garbage now (tests/workers/test_child.py), so it is wrong there too. (On this VM the
    correctness trials' memory is already recycled and catch it first; the verdict must be the same.)"""
    source = KERNEL + '''
lib_acc = load_cpp(r"""
#include <cstdint>
extern "C" void relu_into(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] += x[i] > 0.f ? x[i] : 0.f;  // y never cleared
}
""")

class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        lib_acc.relu_into(x.contiguous(), y, x.numel())
        return y
'''
    for _ in range(3):
        result = pool.evaluate(relu, source, backend="cpp")
        assert result.verdict is Verdict.INCORRECT, (result.reasons, result.output_tail[-500:])


def test_a_cache_cheat_is_still_hack_after_the_replay(pool, relu):
    """The replay that clears an honest bug keeps a cheat caught: outputs cached by the input's address are
    right for that input set as the first call of fresh processes, so the timed call changed behaviour."""
    from pathlib import Path

    cheat = Path(__file__).parents[1] / "adversarial" / "cpp_cache_by_data_ptr.py"
    result = pool.evaluate(relu, cheat.read_text(), backend="cpp")
    assert result.verdict is Verdict.HACK, (result.reasons, result.output_tail[-500:])
    assert result.reasons[0].rule == "outputs_changed"
    assert "right as the first call of fresh processes" in result.reasons[0].message


def test_an_output_kept_on_self_is_honest(pool, relu):
    """Style is not evidence: remembering the last output (or a workspace) on self is no cheat."""
    source = KERNEL + '''
class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        lib.relu(x.contiguous(), y, x.numel())
        self.last = y
        return y
'''
    result = pool.evaluate(relu, source, backend="cpp")
    assert result.verdict is Verdict.OK, result.reasons


def test_threads_left_running_past_forward_are_honest_and_charged(pool, relu):
    """A thread still busy after forward returned (here: spinning in the solution's own code) is no cheat;
    its CPU time past the clock, where the tree's cgroup counts it, is added to the timed batches."""
    source = KERNEL.replace('""")', '''
#include <chrono>
extern "C" void spin(int64_t us) {
    auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
    while (std::chrono::steady_clock::now() < end) {}
}
""")''') + '''
import threading

class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        lib.relu(x.contiguous(), y, x.numel())
        threading.Thread(target=lib.spin, args=(2000,)).start()
        return y
'''
    result = pool.evaluate(relu, source, backend="cpp")
    assert result.verdict is Verdict.OK, result.reasons
    assert result.timing.cpu_past_clock_ms >= 0 and not result.timing.verified


def test_without_timing_the_profile_still_measures_a_whole_batch(pool, relu):
    """The in-process profile (the fallback where samples are too few) of one tiny call is mostly noise: on a
    loaded machine an honest backward's 1-call batch showed 0.148 ms 'untracked' and was judged hack. Without
    a timing stage the profiled batch holds as many calls as a timed one would."""
    example = next(e for e in examples("cpp") if e.task_id == "bundled/L1/1_ReLU")
    result = pool.evaluate(relu, example.path.read_text(), backend="cpp", timing=False)
    assert result.verdict is Verdict.OK, result.reasons
    assert result.profile.own_kernel_calls > 1


@pytest.mark.parametrize("cheat", cheats("cpp"), ids=lambda c: c.cheat)
def test_bundled_cheats_are_rejected(pool, cheat):
    result = pool.evaluate(bundled().get(cheat.task_id), cheat.source, backend="cpp")
    assert result.verdict in (Verdict.HACK, Verdict.INCORRECT), result.reasons
    assert result.speedup is None


@pytest.mark.parametrize("example", examples("cpp"), ids=lambda e: e.task_id)
def test_bundled_cpp_examples_are_ok(pool, example):
    """False-rejection rate over the honest examples: zero."""
    result = pool.evaluate(bundled().get(example.task_id), example.source, backend="cpp")
    assert result.verdict is Verdict.OK, (result.reasons, result.output_tail[-1000:])
    assert result.timing.available and result.speedup is not None
    assert result.timing.speedup_ci_low <= result.speedup
    assert result.profile.coverage is not None


def test_hidden_seeds_differ_between_evaluations(pool, relu):
    """Two evaluations of the same wrong solution see different inputs. Its output is the sum of |x| it was
    given, so the value the judge reports at the first mismatch names the inputs. (A constant output's first
    mismatch and largest error repeat whenever both inputs start negative: a flaky witness.)"""
    source = KERNEL + '''
class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        lib.relu(torch.full_like(x, float(x.abs().sum())), y, x.numel())
        return y
'''
    first = pool.evaluate(relu, source, backend="cpp").correctness.trials[0]
    second = pool.evaluate(relu, source, backend="cpp").correctness.trials[0]
    assert first.actual_value is not None and first.actual_value > 1.0
    assert first.actual_value != second.actual_value


def test_the_timing_stage_says_where_its_time_went(pool, relu):
    """Benchmarks read what holds the GPU's timing slot from these parts (inputs made, mapped, both sides
    run, outputs checked); together they are within the stage's own seconds."""
    result = pool.evaluate(relu, examples("cpp")[0].source, backend="cpp")
    stage = result.stage_s
    parts = [stage[f"timing_{name}"] for name in ("inputs", "map", "run", "check")]
    assert all(p >= 0 for p in parts) and stage["timing_run"] > 0
    assert sum(parts) <= stage["timing"] + 0.01
    assert stage["reference_hello"] <= stage["reference"] and stage["reference_task"] >= 0


def test_result_round_trips_through_a_dict(pool, relu):
    from kernelgym.evaluation.result import EvalResult

    result = pool.evaluate(relu, examples("cpp")[0].source, backend="cpp")
    again = EvalResult.from_dict(result.to_dict())
    assert again.verdict is result.verdict and again.speedup == result.speedup
    assert render_feedback(again) == render_feedback(result)


def test_timing_reports_what_the_trusted_clock_saw(pool, relu):
    timing = pool.evaluate(relu, examples("cpp")[0].source, backend="cpp").timing
    assert timing.round_trip_ms is not None and timing.round_trip_ms > 0  # taken off both sides' batches
    assert timing.calls_per_batch >= 1 and timing.batches >= 1 and timing.candidate.trials == timing.batches
    assert 0 < timing.cpu_time_ratio <= 1.5  # one thread allowed: the candidate's tree stayed within it
    assert timing.readback_lag_ms is None  # a GPU measure


@pytest.mark.parametrize("trials", [1, 2])
def test_very_few_timing_trials_still_judge_an_honest_solution(pool, relu, trials):
    """The judge is told how many batches there were; nothing recounts them (a crash here once)."""
    result = pool.evaluate(relu, examples("cpp")[0].source, backend="cpp", timing_trials=trials)
    assert result.verdict is Verdict.OK, result.reasons
    timed = trials * (2 if result.timing.remeasured else 1)  # a claimed speedup is timed twice
    assert result.timing.batches == timed and result.timing.candidate.trials == timed
