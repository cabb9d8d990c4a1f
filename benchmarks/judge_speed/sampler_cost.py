"""The worker's cost of sampling one batch (evaluation/own_code.py), against an idle process that imported
torch (its maps are what a candidate's look like): opening events per batch versus resuming open ones.

    python benchmarks/judge_speed/sampler_cost.py
"""

from __future__ import annotations

import subprocess
import sys
import time

from kernelgym.evaluation.ip_sampler import IpSampler
from kernelgym.evaluation.own_code import RING_PAGES, BatchSampler

ROUNDS = 50


def main() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time, torch; print(flush=True); time.sleep(120)"],
                             stdout=subprocess.PIPE)
    child.stdout.readline()
    try:
        started = time.perf_counter()
        for _ in range(ROUNDS):
            sampler = IpSampler(child.pid, period_ns=1_000_000, ring_pages=RING_PAGES)
            sampler.start()
            sampler.stop()
        print(f"open, map and close per batch: {(time.perf_counter() - started) / ROUNDS * 1e3:.3f} ms")
        for attribute_samples, side in ((True, "candidate"), (False, "reference")):
            batches = BatchSampler()
            batches.start([child.pid])
            batches.stop(attribute_samples)
            started = time.perf_counter()
            for _ in range(ROUNDS):
                batches.start([child.pid])
                batches.stop(attribute_samples)
            print(f"resumed, {side} batch: {(time.perf_counter() - started) / ROUNDS * 1e3:.3f} ms")
            batches.close()
    finally:
        child.kill()
        child.wait()


if __name__ == "__main__":
    main()
