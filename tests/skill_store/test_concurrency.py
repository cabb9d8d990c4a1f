"""Several writer processes at once, and a writer killed with SIGKILL in the middle of a transaction."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from kernelgym.skill_store import SkillStore

WRITER = str(Path(__file__).with_name("_writer.py"))


def _spawn(db, mode, prefix, count):
    return subprocess.Popen(
        [sys.executable, WRITER, str(db), mode, prefix, str(count)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_concurrent_writers_lose_nothing(db_path):
    SkillStore(db_path, seed=False).close()
    writers = [_spawn(db_path, "rows", f"w{i}", 30) for i in range(4)]
    reader = SkillStore(db_path, seed=False)
    seen = []
    while any(w.poll() is None for w in writers):
        seen.append(len(reader.list()))  # readers keep working while writers write (WAL)
        time.sleep(0.01)
    for w in writers:
        assert w.wait(60) == 0, w.stderr.read()
    assert sorted(reader.ids()) == sorted(f"w{i}-{j}" for i in range(4) for j in range(30))
    assert seen == sorted(seen)  # counts only ever grow: no reader saw a half-applied state go away
    assert reader.integrity_check() == "ok"


def test_writers_racing_to_create_and_seed_a_new_database(tmp_path):
    db = tmp_path / "fresh.sqlite"
    code = (
        "import sys; from kernelgym.skill_store import SkillStore, seed_skills; s = SkillStore(sys.argv[1]); "
        "assert len(s) >= len(seed_skills())"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(db)], stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    for p in procs:
        assert p.wait(60) == 0, p.stderr.read()
    with SkillStore(db) as store:
        from kernelgym.skill_store import seed_skills

        assert store.ids() == [s.id for s in seed_skills()]


def test_sigkill_mid_transaction_keeps_committed_rows_only(db_path):
    SkillStore(db_path, seed=False).close()
    writer = _spawn(db_path, "crash", "c", 20)
    line = writer.stdout.readline()
    assert line.strip() == "MID", writer.stderr.read()
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait(10)
    with SkillStore(db_path, seed=False) as store:
        assert store.integrity_check() == "ok"
        assert sorted(store.ids()) == sorted(f"c-{i}" for i in range(20))
        assert not any("uncommitted" in s.title for s in store.list())
        store.put(store.get("c-0"))  # and the database still takes writes


def test_sigkill_at_random_moments_never_leaves_a_partial_batch(db_path):
    SkillStore(db_path, seed=False).close()
    for attempt in range(3):
        writer = _spawn(db_path, "loop", f"r{attempt}", 25)
        assert writer.stdout.readline().startswith("COMMITTED"), writer.stderr.read()
        time.sleep(0.05 + 0.07 * attempt)  # somewhere inside a later batch, or its commit
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait(10)
    with SkillStore(db_path, seed=False) as store:
        assert store.integrity_check() == "ok"
        batches = {}
        for skill in store.list():
            batches.setdefault(skill.applies_when.patterns[0] + skill.id.split("-")[0], []).append(skill.id)
        assert batches and all(len(ids) == 25 for ids in batches.values())
