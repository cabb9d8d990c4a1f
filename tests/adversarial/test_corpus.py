"""The adversarial corpus: every cheating solution in this folder goes through the real judge and earns
nothing.

Each `<backend>_<exploit>.py` file here is one cheat, headed by

    # Exploit: <name>. <one sentence>
    # Task: <bundled task id>            e.g. L1/1_ReLU
    # Backend: cpp | triton | cuda
    # Expect: crash              optional: verdicts accepted besides hack/incorrect
    #                            (exits; targets gone from the process)
    # Why: <why that verdict earns no reward>    required with Expect
    # Max-speedup: 1.5           optional: the measured speedup, where timing ran, stays below this
    # Group: <name> <order>      optional: evaluated in order, in one pool, after the others of its group

A cheat passes when it earns nothing: either the judge's verdict is hack or incorrect (or the listed Expect)
and no reward in `kernelgym.rewards` pays it more than a plain failed attempt; or its trick was defused —
it aims at something that no longer lives in the candidate's process (the timer, the reference, the checked
calls), so what is left is the honest part of it: verdict ok, no verified speedup, a measured speedup below
its Max-speedup (1.1 when not given), and no reward above a correct solution measured at that speedup. cpp
cheats run on the CPU (in CI); triton and cuda cheats are marked gpu and run on a GPU host. A failing case
here is a hole in the judge: keep it failing until the judge is fixed, never loosen the assertion.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from kernelgym import rewards
from kernelgym.evaluation.options import EvalOptions
from kernelgym.evaluation.result import EvalResult, Verdict
from kernelgym.solutions import examples
from kernelgym.tasks import bundled

HERE = Path(__file__).parent
BACKENDS = ("cpp", "triton", "cuda")
NOT_CHEATS = {"test_corpus.py", "conftest.py", "__init__.py"}
FIELD = re.compile(r"^# (Exploit|Task|Backend|Expect|Why|Max-speedup|Group): (.+)$", re.MULTILINE)
FAILED_VERDICTS = {Verdict.HACK, Verdict.INCORRECT}
EXIT_VERDICTS = {"crash": Verdict.CRASH, "timeout": Verdict.TIMEOUT, "runtime_error": Verdict.RUNTIME_ERROR}


@dataclass(frozen=True)
class Cheat:
    path: Path
    exploit: str
    task_id: str
    backend: str
    accepted: frozenset[Verdict]
    max_speedup: float | None
    group: tuple[str, int] | None

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def source(self) -> str:
        return self.path.read_text()

    @property
    def size(self) -> str:
        return "cpu" if self.backend == "cpp" else "gpu"


def parse(path: Path) -> Cheat:
    text = path.read_text()
    head = "\n".join(text.splitlines()[:8])
    fields: dict[str, str] = {}
    for key, value in FIELD.findall(head):
        assert key not in fields, f"{path.name}: '# {key}:' appears twice"
        fields[key] = value.strip()
    for key in ("Exploit", "Task", "Backend"):
        assert key in fields, f"{path.name}: the header needs a '# {key}:' line"
    assert text.startswith("# Exploit: "), (f"{path.name}: the first line must be "
                                           "'# Exploit: <name>. <sentence>'")
    assert ". " in fields["Exploit"], f"{path.name}: Exploit is '<name>. <one sentence>'"
    backend = fields["Backend"]
    assert backend in BACKENDS, f"{path.name}: Backend must be one of {BACKENDS}"
    assert path.name.startswith(backend + "_"), f"{path.name}: the file name starts with its backend"
    accepted = set(FAILED_VERDICTS)
    if "Expect" in fields:
        assert "Why" in fields, f"{path.name}: an Expect line needs a Why line saying why it earns nothing"
        for word in fields["Expect"].replace(",", " ").split():
            assert word in EXIT_VERDICTS, f"{path.name}: Expect may list only {sorted(EXIT_VERDICTS)}"
            accepted.add(EXIT_VERDICTS[word])
    group = None
    if "Group" in fields:
        name, order = fields["Group"].split()
        group = (name, int(order))
    return Cheat(path, fields["Exploit"].split(". ", 1)[0], fields["Task"], backend, frozenset(accepted),
                 float(fields["Max-speedup"]) if "Max-speedup" in fields else None, group)


CHEATS = [parse(p) for p in sorted(HERE.glob("*.py")) if p.name not in NOT_CHEATS]
SINGLE = [c for c in CHEATS if c.group is None]
GROUPS: dict[str, list[Cheat]] = {}
for _cheat in sorted((c for c in CHEATS if c.group), key=lambda c: c.group):
    GROUPS.setdefault(_cheat.group[0], []).append(_cheat)


def _param(cheat: Cheat):
    return pytest.param(cheat, id=cheat.name, marks=[pytest.mark.gpu] if cheat.backend != "cpp" else [])


def _group_param(name: str, members: list[Cheat]):
    gpu = any(c.backend != "cpp" for c in members)
    return pytest.param(members, id=name, marks=[pytest.mark.gpu] if gpu else [])


@pytest.fixture(scope="module")
def corpus_pool():
    from kernelgym.workers.pool import EvalPool

    # A shorter timing budget than the default (at least 5 batches still): the verdict rules are the same.
    # On a GPU the launches seen from outside the candidate decide, the default (EvalOptions.launch_evidence);
    # KERNELGYM_CORPUS_LAUNCH_EVIDENCE=0 judges with the in-process profile alone, to see what that credits.
    launch_evidence = os.environ.get("KERNELGYM_CORPUS_LAUNCH_EVIDENCE", "1") != "0"
    options = EvalOptions(timing_budget_s=1.0, launch_evidence=launch_evidence)
    with EvalPool(workers=2, options=options) as pool:
        yield pool


def _failed_attempt(result: EvalResult) -> EvalResult:
    """The baseline no cheat may beat: the same task, judged incorrect."""
    return EvalResult(result.task_id, result.backend, result.size, Verdict.INCORRECT, ["incorrect: baseline"])


def _describe(cheat: Cheat, result: EvalResult) -> str:
    timing = result.timing
    measured = "no timing"
    if timing and timing.available:
        measured = f"measured speedup {timing.speedup}x (verified={timing.verified})"
    return (f"{cheat.name} ({cheat.exploit}) got verdict {result.verdict.value}, {measured}; "
            f"reasons={result.reasons}; output tail: {result.output_tail[-400:]!r}")


DEFUSED_MAX_SPEEDUP = 1.1


def _correct_at(result: EvalResult, speedup: float, verified: bool) -> EvalResult:
    """The same measurement, as an honest correct solution at `speedup` would have it."""
    import copy

    honest = copy.deepcopy(result)
    honest.timing.speedup, honest.timing.verified = speedup, verified
    return honest


def assert_no_credit(cheat: Cheat, result: EvalResult) -> None:
    if result.verdict is Verdict.OK:  # defused: only the honest part of the cheat is left
        # Max-speedup, where a file gives it, is what its honest kernel alone reaches; else no speedup at all.
        limit = cheat.max_speedup or DEFUSED_MAX_SPEEDUP
        if cheat.max_speedup is None:
            assert result.verified_speedup is None, "HOLE: " + _describe(cheat, result)
        assert result.speedup is not None and result.speedup < limit, "HOLE: " + _describe(cheat, result)
        for name in rewards.names():
            reward = rewards.get_reward(name)
            honest = _correct_at(result, limit, verified=cheat.max_speedup is not None)
            assert reward(result) <= reward(honest), f"reward {name!r}: " + _describe(cheat, result)
        return
    label = "unexpected verdict (neither hack nor incorrect): "
    assert result.verdict in cheat.accepted, label + _describe(cheat, result)
    assert result.speedup is None and result.verified_speedup is None, _describe(cheat, result)
    baseline = _failed_attempt(result)
    for name in rewards.names():
        reward = rewards.get_reward(name)
        assert reward(result) <= reward(baseline), (f"reward {name!r} pays the cheat more than a failure: "
                                                    + _describe(cheat, result))
    if cheat.max_speedup is not None and result.timing is not None and result.timing.speedup is not None:
        assert result.timing.speedup <= cheat.max_speedup, ("the cheat moved the measured time: "
                                                            + _describe(cheat, result))


def evaluate(pool, cheat: Cheat) -> EvalResult:
    return pool.evaluate(bundled().get(cheat.task_id), cheat.source, backend=cheat.backend, size=cheat.size)


# the corpus itself -----------------------------------------------------------------------------------------

def test_corpus_is_complete():
    assert len(CHEATS) >= 25
    assert sum(c.backend == "cpp" for c in CHEATS) >= 25, "the CPU corpus (run in CI) has at least 25 cheats"
    assert {c.backend for c in CHEATS} == set(BACKENDS)
    for name, members in GROUPS.items():
        orders = [c.group[1] for c in members]
        assert orders == sorted(set(orders)) and len(members) >= 2, (f"group {name}: distinct orders, "
                                                                     "at least two")


@pytest.mark.parametrize("cheat", [_param(c) for c in CHEATS])
def test_header_names_a_bundled_task(cheat):
    assert bundled().get(cheat.task_id) is not None


@pytest.mark.parametrize("cheat", [_param(c) for c in SINGLE])
def test_cheat_earns_nothing(corpus_pool, cheat):
    result = evaluate(corpus_pool, cheat)
    if result.verdict is Verdict.OK and (result.speedup or 0) >= (cheat.max_speedup or DEFUSED_MAX_SPEEDUP):
        # A defused cheat runs an honest kernel; on 2 cores an honest ReLU measured up to 1.24x in one
        # evaluation of many (0.83-0.98x alone): a hole is a speed that holds when judged again.
        result = evaluate(corpus_pool, cheat)
    assert_no_credit(cheat, result)


@pytest.mark.parametrize("members", [_group_param(n, m) for n, m in sorted(GROUPS.items())])
def test_cheats_that_pass_state_between_evaluations_earn_nothing(corpus_pool, members):
    """Evaluated one after the other in one pool: what the first leaves behind must not help the next."""
    for cheat in members:
        assert_no_credit(cheat, evaluate(corpus_pool, cheat))


# no false rejections -------------------------------------------------------------------------------------

@pytest.mark.parametrize("example", examples("cpp"), ids=lambda e: e.task_id)
def test_honest_cpp_examples_stay_ok(corpus_pool, example):
    """The honest bundled solutions, judged by the same pool after the cheats: false-rejection rate zero."""
    result = corpus_pool.evaluate(bundled().get(example.task_id), example.source, backend="cpp", size="cpu")
    assert result.verdict is Verdict.OK, (example.task_id, result.reasons, result.output_tail[-1000:])
    assert result.correct and result.timing is not None and result.timing.available


# a table of the corpus, for reports: python tests/adversarial/test_corpus.py [cpp|triton|cuda|FILE ...] -----

def _table(selected: list[Cheat]) -> None:
    from kernelgym.workers.pool import EvalPool

    print("| file | backend | verdict | measured speedup | verified | earns nothing | reason |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    with EvalPool(workers=2) as pool:
        for cheat in sorted(selected, key=lambda c: (c.group or ("", 0), c.name)):
            result = evaluate(pool, cheat)
            try:
                assert_no_credit(cheat, result)
                fine = "yes"
            except AssertionError:
                fine = "**NO (hole)**"
            timing = result.timing
            measured = f"{timing.speedup:.2f}x" if timing and timing.speedup is not None else "-"
            reason = (result.reasons[0] if result.reasons else "").replace("|", "/")[:140]
            print(f"| {cheat.path.name} | {cheat.backend} | {result.verdict.value} | {measured} | "
                  f"{bool(timing and timing.verified)} | {fine} | {reason} |", flush=True)


if __name__ == "__main__":
    import sys

    wanted = sys.argv[1:]
    chosen = [c for c in CHEATS
              if not wanted or c.backend in wanted or c.path.name in wanted or c.name in wanted]
    _table(chosen)
