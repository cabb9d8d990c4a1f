"""Every local file that the README, the docs and the examples point to exists (a missing docs/envs.md was
once referenced by examples/gym_quickstart.py), and so does every benchmark script or result that they, the
code and the benchmarks' own pages name (benchmarks/ was regrouped once)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [ROOT / "README.md", ROOT / "agents" / "README.md", *sorted((ROOT / "docs").glob("*.md")),
           *sorted((ROOT / "examples").glob("*.py")), *sorted((ROOT / "benchmarks").rglob("*.md"))]
# Plain mentions of a benchmark file are checked where they say how to run something today; the result pages
# are records, whose old commands may name a script as it was called then.
MENTION_SOURCES = [ROOT / "README.md", ROOT / "agents" / "README.md", *sorted((ROOT / "docs").glob("*.md")),
                   ROOT / "benchmarks" / "README.md", *sorted((ROOT / "examples").glob("*.py")),
                   *sorted(p for folder in ("kernelgym", "tests", "benchmarks")
                           for pattern in ("*.py", "*.sh") for p in (ROOT / folder).rglob(pattern)
                           if p != Path(__file__).resolve())]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")  # markdown links to local files
DOC_MENTION = re.compile(r"\b(docs/[\w./-]+\.md)\b")  # plain mentions of a docs page, in text and code
BENCHMARK_MENTION = re.compile(r"(?<![\w/.])(benchmarks/[\w./-]+\.(?:py|sh|md|json|jsonl|png))\b")


def _targets(path: Path) -> set[Path]:
    text = path.read_text()
    found = {path.parent / m for m in LINK.findall(text) if "://" not in m and not m.startswith("mailto:")}
    found |= {ROOT / m for m in DOC_MENTION.findall(text)}
    return found


def test_every_local_link_and_docs_mention_exists():
    missing = [(str(src.relative_to(ROOT)), str(t)) for src in SOURCES for t in sorted(_targets(src))
               if not t.exists()]
    assert not missing, missing


def test_every_benchmark_file_named_exists():
    missing = [(str(src.relative_to(ROOT)), m) for src in MENTION_SOURCES
               for m in sorted(set(BENCHMARK_MENTION.findall(src.read_text()))) if not (ROOT / m).exists()]
    assert not missing, missing


def test_the_check_finds_a_missing_page(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("see [the envs](docs/nope.md) and docs/also_missing.md")
    assert {t.name for t in _targets(page)} == {"nope.md", "also_missing.md"}
    assert BENCHMARK_MENTION.findall("python benchmarks/x/gone.py, tests/benchmarks/test_y.py") == [
        "benchmarks/x/gone.py"]
