"""Every local file that the README, the docs and the examples point to exists (a missing docs/envs.md was
once referenced by examples/gym_quickstart.py)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [ROOT / "README.md", ROOT / "agents" / "README.md", *sorted((ROOT / "docs").glob("*.md")),
           *sorted((ROOT / "examples").glob("*.py"))]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")  # markdown links to local files
DOC_MENTION = re.compile(r"\b(docs/[\w./-]+\.md)\b")  # plain mentions of a docs page, in text and code


def _targets(path: Path) -> set[Path]:
    text = path.read_text()
    found = {path.parent / m for m in LINK.findall(text) if "://" not in m and not m.startswith("mailto:")}
    found |= {ROOT / m for m in DOC_MENTION.findall(text)}
    return found


def test_every_local_link_and_docs_mention_exists():
    missing = [(str(src.relative_to(ROOT)), str(t)) for src in SOURCES for t in sorted(_targets(src))
               if not t.exists()]
    assert not missing, missing


def test_the_check_finds_a_missing_page(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("see [the envs](docs/nope.md) and docs/also_missing.md")
    assert {t.name for t in _targets(page)} == {"nope.md", "also_missing.md"}
