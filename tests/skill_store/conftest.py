import pytest

from kernelgym.skill_store.skill import AppliesWhen, Skill


@pytest.fixture(autouse=True)
def _isolated_default_db(tmp_path, monkeypatch):
    # No test may touch the user's ~/.cache/kernelgym/skills.sqlite.
    monkeypatch.setenv("KERNELGYM_SKILLS_DB", str(tmp_path / "default-skills.sqlite"))


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "skills.sqlite"


def _make_skill(skill_id: str, **overrides) -> Skill:
    fields = {
        "id": skill_id,
        "title": f"title of {skill_id}",
        "technique": f"technique of {skill_id}",
        "applies_when": AppliesWhen(patterns=["matmul"], bound="compute", backends=["cpp"]),
        "code_pattern": "for (;;) {}",
    }
    fields.update(overrides)
    return Skill(**fields)


@pytest.fixture
def make_skill():
    return _make_skill
