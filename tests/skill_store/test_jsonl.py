"""JSONL import/export: round trip, stable diffable output, all-or-nothing imports with clear errors."""

import io
import json

import pytest

from kernelgym.skill_store import SkillStore, seed_skills
from kernelgym.skill_store.skill import SkillFormatError
from kernelgym.skill_store.store import dump_jsonl, parse_jsonl


def test_round_trip_is_exact(tmp_path):
    source = SkillStore(tmp_path / "a.sqlite")
    out = tmp_path / "lib.jsonl"
    text = source.export_jsonl(out)
    assert out.read_text() == text

    target = SkillStore(tmp_path / "b.sqlite", seed=False)
    report = target.import_jsonl(out)
    assert len(report.added) == len(source) and not report.updated
    assert target.export_jsonl() == text
    assert [s.to_dict() for s in target.list()] == [s.to_dict() for s in source.list()]


def test_export_is_sorted_and_stable(tmp_path, make_skill):
    store = SkillStore(tmp_path / "s.sqlite", seed=False)
    for name in ("zeta", "alpha", "mid"):
        store.put(make_skill(name))
    lines = store.export_jsonl().splitlines()
    assert [json.loads(line)["id"] for line in lines] == ["alpha", "mid", "zeta"]
    assert all(line.startswith('{"id": ') for line in lines)
    assert store.export_jsonl() == dump_jsonl(reversed(store.list()))  # input order does not matter


def test_reimport_bumps_only_changed_records(tmp_path, make_skill):
    store = SkillStore(tmp_path / "s.sqlite", seed=False)
    store.put(make_skill("one"))
    store.put(make_skill("two"))
    exported = store.export_jsonl()
    rows = [json.loads(line) for line in exported.splitlines()]
    rows[1]["technique"] = "edited in a text editor"
    rows.append(make_skill("three").to_dict())
    report = store.import_jsonl(io.StringIO("\n".join(json.dumps(r) for r in rows)))
    assert (report.added, report.updated, report.unchanged) == (["three"], ["two"], ["one"])
    assert store.get("two").version == 2 and store.get("one").version == 1


@pytest.mark.parametrize(
    "text, message",
    [
        (
            '{"id": "ok-one", "title": "t", "technique": "x", "applies_when": {}}\n{not json}\n',
            r":2: bad JSON",
        ),
        (
            '{"id": "ok-one", "title": "t", "technique": "x", "applies_when": {}}\n[1, 2]\n',
            r":2: a skill must be",
        ),
        (
            ('{"id": "ok-one", "title": "t", "technique": "x", "applies_when": {}}\n'
             '{"id": "ok-one", "title": "t", "technique": "x", "applies_when": {}}\n'),
            r":2: duplicate",
        ),
    ],
)
def test_bad_import_writes_nothing(tmp_path, text, message):
    store = SkillStore(tmp_path / "s.sqlite", seed=False)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(text)
    with pytest.raises(SkillFormatError, match=message):
        store.import_jsonl(bad)
    assert len(store) == 0


def test_seed_file_is_canonical():
    # The shipped seed file is exactly what export would write: diffs against an export show real changes.
    from importlib import resources

    root = resources.files("kernelgym.skill_store") / "seeds"
    shipped = "".join(
        e.read_text() for e in sorted(root.iterdir(), key=lambda e: e.name) if e.name.endswith(".jsonl")
    )
    assert dump_jsonl(parse_jsonl(shipped)) == shipped
    assert [s.id for s in seed_skills()] == sorted(s.id for s in seed_skills())
