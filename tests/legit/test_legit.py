"""The legit corpus: honest solutions in the idioms real models write; every one must be judged `ok`.

Each `cpp_<idiom>.py` file here is one honest solution of a bundled task (cpu size), headed by

    # Idiom: <name>. <one sentence>
    # Task: <bundled task id>            e.g. L1/1_ReLU
    # Backend: cpp

A failing case here is a false rejection: the judge punished code for its style, not for what it ran.
Run as a table: python tests/legit/test_legit.py [FILE ...]
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from kernelgym.evaluation.options import EvalOptions
from kernelgym.evaluation.result import EvalResult, Verdict
from kernelgym.tasks import bundled

HERE = Path(__file__).parent
FIELD = re.compile(r"^# (Idiom|Task|Backend): (.+)$", re.MULTILINE)
NOT_SOLUTIONS = {"test_legit.py", "conftest.py", "__init__.py"}


@dataclass(frozen=True)
class Legit:
    path: Path
    idiom: str
    task_id: str
    backend: str

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def source(self) -> str:
        return self.path.read_text()


def parse(path: Path) -> Legit:
    text = path.read_text()
    fields = dict(FIELD.findall("\n".join(text.splitlines()[:6])))
    assert text.startswith("# Idiom: "), f"{path.name}: the first line must be '# Idiom: <name>. <sentence>'"
    for key in ("Idiom", "Task", "Backend"):
        assert key in fields, f"{path.name}: the header needs a '# {key}:' line"
    assert fields["Backend"].strip() == "cpp" and path.name.startswith("cpp_"), (f"{path.name}: cpp only, "
                                                                                "named cpp_*")
    return Legit(path, fields["Idiom"].split(". ", 1)[0], fields["Task"].strip(), "cpp")


SOLUTIONS = [parse(p) for p in sorted(HERE.glob("*.py")) if p.name not in NOT_SOLUTIONS]


def rule_of(reason) -> str:
    """The rule a reason names (typed reasons will carry it as `.rule`)."""
    return getattr(reason, "rule", None) or str(reason).split(":")[0]


def _describe(legit: Legit, result: EvalResult) -> str:
    timing = result.timing
    speed = f"speedup {timing.speedup}x" if timing and timing.speedup is not None else "no timing"
    return (f"{legit.name} ({legit.idiom}) on {legit.task_id}: {result.verdict.value}, {speed}; "
            f"rules={[rule_of(r) for r in result.reasons]}; reasons={result.reasons}; "
            f"output tail: {result.output_tail[-600:]!r}")


def submit(pool, legit: Legit):
    return pool.submit(bundled().get(legit.task_id), legit.source, backend=legit.backend, size="cpu")


def evaluate(pool, legit: Legit) -> EvalResult:
    return submit(pool, legit).result()


@pytest.fixture(scope="module")
def judged():
    """Every solution submitted at once (the pool's workers judge them in parallel); name -> future."""
    from kernelgym.workers.pool import EvalPool

    with EvalPool(workers=2, options=EvalOptions(timing_budget_s=1.0)) as pool:
        yield {legit.name: submit(pool, legit) for legit in SOLUTIONS}


def test_corpus_covers_the_idioms():
    assert len(SOLUTIONS) >= 20
    assert len({s.idiom for s in SOLUTIONS}) == len(SOLUTIONS), "one idiom per file"
    assert sum("load_inline" in s.source for s in SOLUTIONS) <= 4, "load_inline builds are slow: few of them"


@pytest.mark.parametrize("legit", SOLUTIONS, ids=lambda s: s.name)
def test_header_names_a_bundled_task(legit):
    assert bundled().get(legit.task_id) is not None


@pytest.mark.slow
@pytest.mark.parametrize("legit", SOLUTIONS, ids=lambda s: s.name)
def test_honest_idiom_is_ok(judged, legit):
    result = judged[legit.name].result()
    assert result.verdict is Verdict.OK, "FALSE REJECTION: " + _describe(legit, result)
    assert result.correct and result.timing is not None and result.timing.available, _describe(legit, result)


# a table of the corpus, for reports -------------------------------------------------------------------------

def _table(selected: list[Legit]) -> None:
    from kernelgym.workers.pool import EvalPool

    print("| file | task | verdict | speedup | rules |")
    print("| --- | --- | --- | --- | --- |")
    with EvalPool(workers=2) as pool:
        futures = [(legit, submit(pool, legit)) for legit in selected]
        for legit, future in futures:
            result = future.result()
            timing = result.timing
            speed = f"{timing.speedup:.2f}x" if timing and timing.speedup is not None else "-"
            rules = ", ".join(sorted({rule_of(r) for r in result.reasons}))
            first = (result.reasons[0] if result.reasons else "").replace("|", "/")[:120]
            print(f"| {legit.path.name} | {legit.task_id} | {result.verdict.value} | {speed} | {rules} "
                  f"{first} |",
                  flush=True)


if __name__ == "__main__":
    import sys

    wanted = sys.argv[1:]
    _table([s for s in SOLUTIONS if not wanted or s.path.name in wanted or s.name in wanted])
