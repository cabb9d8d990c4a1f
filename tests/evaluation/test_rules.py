"""The rules catalogue is the one source of the judge's rules: doc and code agree, reasons stay typed."""

from __future__ import annotations

import copy
import pickle
import re
from pathlib import Path

from kernelgym.evaluation import rules
from kernelgym.evaluation.result import EvalResult, Verdict
from kernelgym.evaluation.rules import RULES, Reason, catalogue_markdown

ROOT = Path(__file__).resolve().parents[2]


def test_the_threat_model_lists_exactly_the_catalogue():
    doc = (ROOT / "docs" / "threat-model.md").read_text()
    assert catalogue_markdown() in doc, "regenerate the table: python -c 'from kernelgym.evaluation.rules " \
                                        "import catalogue_markdown; print(catalogue_markdown())'"


def test_a_reason_keeps_its_rule_through_copies_pickles_and_json():
    finding = rules.reason(rules.EXTRA_CORES, "2.0 cores: the reference gets 1")
    assert finding.rule == "extra_cores" and finding.verdict is Verdict.HACK
    for again in (copy.deepcopy(finding), pickle.loads(pickle.dumps(finding)), Reason.parse(str(finding))):
        assert again.rule == "extra_cores" and again.message == finding.message and again == finding
    result = EvalResult("t", "cpp", "cpu", Verdict.HACK, [finding])
    assert EvalResult.from_dict(result.to_dict()).reasons[0].rule == "extra_cores"


def test_every_rule_the_pipeline_raises_is_in_the_catalogue():
    # the pipeline, its stages and the modules they use (evaluation/stages/ a file each)
    source = "".join(path.read_text() for path in sorted((ROOT / "kernelgym" / "evaluation").rglob("*.py")))
    used = set(re.findall(r"rules\.([A-Z_]+)\b", source)) - {"Rule"}
    names = {name for name, value in vars(rules).items() if isinstance(value, rules.Rule)}
    assert used and used <= names
    assert all(RULES[getattr(rules, n).name] is getattr(rules, n) for n in used)


def test_no_code_parses_the_text_of_a_reason():
    pattern = re.compile(r"reasons?\W.*(split\(\":\"\)|startswith\(\"[a-z_]+)|split\(\":\"\)\[0\]")
    offenders = []
    for folder in ("kernelgym", "envs", "agents", "skill_store"):
        for path in (ROOT / folder).rglob("*.py"):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if pattern.search(line):
                    offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, "read Reason.rule instead:\n" + "\n".join(offenders)
