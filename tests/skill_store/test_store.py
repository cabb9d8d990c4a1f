"""SkillStore: CRUD, versions, validation, default path, seeding."""

import json
import sqlite3

import pytest

from kernelgym.skill_store import SkillStore, default_db_path, open_store, seed_skills
from kernelgym.skill_store.skill import AppliesWhen, Evidence, Skill, SkillFormatError, SkillNotFoundError
from kernelgym.skill_store.store import SkillExistsError, StoreError


def test_crud_and_version_bump(db_path, make_skill):
    store = SkillStore(db_path, seed=False)
    assert len(store) == 0
    store.add(make_skill("tile-gemm"))
    assert "tile-gemm" in store and store.get("tile-gemm").version == 1
    with pytest.raises(SkillExistsError):
        store.add(make_skill("tile-gemm"))

    same = store.put(make_skill("tile-gemm"))
    assert same.version == 1  # identical content: no new version

    changed = make_skill("tile-gemm", technique="a better explanation")
    stored = store.put(changed)
    assert stored.version == 2 and store.get("tile-gemm").technique == "a better explanation"

    skill = store.get("tile-gemm")
    skill.evidence.append(
        Evidence(task_id="bundled/L1/1_ReLU", speedup=1.3, hardware="test", date="2025-01-01")
    )
    assert store.put(skill).version == 3
    assert store.get("tile-gemm").evidence[0].speedup == 1.3

    store.delete("tile-gemm")
    assert "tile-gemm" not in store
    with pytest.raises(SkillNotFoundError):
        store.get("tile-gemm")
    with pytest.raises(SkillNotFoundError):
        store.delete("tile-gemm")
    store.close()


def test_list_filters_and_order(db_path, make_skill):
    store = SkillStore(db_path, seed=False)
    store.put(make_skill("b-cuda", applies_when=AppliesWhen(backends=["cuda"])))
    store.put(make_skill("a-cpp", status="admitted"))
    store.put(make_skill("c-both", status="rejected", applies_when=AppliesWhen(backends=["cuda", "cpp"])))
    assert store.ids() == ["a-cpp", "b-cuda", "c-both"]
    assert [s.id for s in store.list(backend="cuda")] == ["b-cuda", "c-both"]
    assert [s.id for s in store.list(status="admitted")] == ["a-cpp"]
    assert [s.id for s in store.list(status=("admitted", "rejected"), backend="cpp")] == ["a-cpp", "c-both"]


def test_persists_across_connections(db_path, make_skill):
    with SkillStore(db_path, seed=False) as store:
        store.put(make_skill("kept"))
    with SkillStore(db_path, seed=False) as again:
        assert again.get("kept").title == "title of kept"
        assert again.integrity_check() == "ok"
    mode = sqlite3.connect(db_path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_transaction_rolls_back_on_error(db_path, make_skill):
    store = SkillStore(db_path, seed=False)
    store.put(make_skill("before"))
    with pytest.raises(RuntimeError), store.transaction():
        store.put(make_skill("inside-1"))
        store.put(make_skill("inside-2"))
        raise RuntimeError("boom")
    assert store.ids() == ["before"]


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"id": "Bad Id", "title": "t", "technique": "x", "applies_when": {}}, "skill id"),
        ({"id": "ok-id", "title": "", "technique": "x", "applies_when": {}}, "title"),
        ({"id": "ok-id", "title": "t", "technique": "x", "applies_when": {"bound": "io"}}, "bound"),
        ({"id": "ok-id", "title": "t", "technique": "x", "applies_when": {"backends": ["rocm"]}}, "backends"),
        ({"id": "ok-id", "title": "t", "technique": "x", "applies_when": {}, "status": "maybe"}, "status"),
        ({"id": "ok-id", "title": "t", "technique": "x", "applies_when": {}, "colour": "red"}, "unknown"),
        ({"id": "ok-id", "title": "t", "applies_when": {}}, "technique"),
        (
            {
                "id": "ok-id",
                "title": "t",
                "technique": "x",
                "applies_when": {},
                "evidence": [{"task_id": "a"}],
            },
            "speedup",
        ),
    ],
)
def test_malformed_records_are_rejected(bad, message):
    with pytest.raises(SkillFormatError, match=message):
        Skill.from_dict(bad)


def test_record_round_trips_through_dict(make_skill):
    skill = make_skill("round-trip", evidence=[Evidence("bundled/L1/1_ReLU", 1.5, "cpu", "2025-01-01")])
    again = Skill.from_dict(json.loads(json.dumps(skill.to_dict())))
    assert again == skill
    assert list(skill.to_dict())[:3] == ["id", "title", "applies_when"]  # stable, readable key order


def test_prompt_rendering():
    skill = next(s for s in seed_skills() if s.id == "online-softmax")
    text = skill.to_prompt()
    assert text.startswith("### Online softmax") and "[online-softmax]" in text and skill.code_pattern in text
    skill.evidence.append(Evidence("bundled/L1/10_Softmax", 1.8, "a CPU", "2025-01-01"))
    assert "Verified: 1.80x on bundled/L1/10_Softmax (a CPU)." in skill.to_prompt()


def test_default_path_from_environment(tmp_path, monkeypatch):
    target = tmp_path / "env" / "lib.sqlite"
    monkeypatch.setenv("KERNELGYM_SKILLS_DB", str(target))
    assert default_db_path() == target
    store = open_store()
    assert store.path == target and target.exists()
    monkeypatch.delenv("KERNELGYM_SKILLS_DB")
    assert str(default_db_path()).endswith(".cache/kernelgym/skills.sqlite")


def test_new_database_is_seeded_once(db_path):
    store = SkillStore(db_path)
    seeds = seed_skills()
    assert len(store) == len(seeds) >= 30
    store.delete(seeds[0].id)
    store.close()
    # Reopening does not bring back a skill the user deleted.
    assert seeds[0].id not in SkillStore(db_path)


def test_not_a_database(tmp_path):
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError):
        SkillStore(junk)
