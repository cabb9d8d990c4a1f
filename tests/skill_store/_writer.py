"""A writer process for the concurrency and crash tests (run as a script, not collected by pytest).

usage: _writer.py DB MODE PREFIX COUNT
  rows:  put COUNT skills PREFIX-0..N, one transaction each
  crash: commit COUNT skills, then open a transaction, write more, print MID and wait to be killed
  loop:  commit batches of COUNT skills (one transaction per batch, tagged with the batch number) forever
"""

import sys
import time

from kernelgym.skill_store.skill import AppliesWhen, Skill
from kernelgym.skill_store.store import SkillStore


def skill(skill_id: str, tag: str = "") -> Skill:
    return Skill(
        id=skill_id,
        title=f"{skill_id} {tag}".strip(),
        technique="written by a test writer process",
        applies_when=AppliesWhen(patterns=[tag] if tag else [], backends=["cpp"]),
    )


def main() -> None:
    db, mode, prefix, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    store = SkillStore(db, seed=False)
    if mode == "rows":
        for i in range(count):
            store.put(skill(f"{prefix}-{i}"))
    elif mode == "crash":
        for i in range(count):
            store.put(skill(f"{prefix}-{i}"))
        with store.transaction():
            for i in range(count, count + 200):
                store.put(skill(f"{prefix}-{i}", "uncommitted"))
            print("MID", flush=True)
            time.sleep(120)
    elif mode == "loop":
        batch = 0
        while True:
            with store.transaction():
                for i in range(count):
                    store.put(skill(f"{prefix}-b{batch}-{i}", f"batch{batch}"))
            print(f"COMMITTED {batch}", flush=True)
            batch += 1
    store.close()


if __name__ == "__main__":
    main()
