"""What the GPU launch evidence costs, measured without a GPU (issue 28): a stand-in CUDA runtime library
exporting the probed launch entries, loaded by a child with N idle threads; the launch watch's start
(EvaluationLaunchWatch, evaluation/launch_watch.py), one take (what each batch waits), and its close timed on
it.

    python benchmarks/judge_speed/launch_watch_cost.py [--threads 1,10,30]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kernelgym.evaluation.gpu_evidence import UNTIMED
from kernelgym.evaluation.launch_decode import RUNTIME_ENTRIES
from kernelgym.evaluation.launch_watch import EvaluationLaunchWatch

CHILD = """
import ctypes, sys, threading
ctypes.CDLL(sys.argv[1])
stop = threading.Event()
for _ in range(int(sys.argv[2])):
    threading.Thread(target=stop.wait).start()
print("ready", flush=True)
sys.stdin.readline()
stop.set()
"""


def stand_in(folder: Path) -> Path:
    entry = '__attribute__((noinline)) int {}(long k) {{ __asm__ volatile("" ::: "memory"); return 0; }}\n'
    (folder / "rt.c").write_text("".join(entry.format(name) for name in RUNTIME_ENTRIES))
    library = folder / "libcudart.so.13"
    subprocess.run(["gcc", "-O2", "-fPIC", "-shared", str(folder / "rt.c"), "-o", str(library)], check=True)
    return library


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", default="1,10,30")
    args = parser.parse_args()
    print("| threads in the target | perf events | start s | take s (what a batch waits) | close s |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        library = stand_in(Path(folder))
        for threads in (int(n) for n in args.threads.split(",")):
            child = subprocess.Popen([sys.executable, "-c", CHILD, str(library), str(threads)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            try:
                assert child.stdout.readline().strip() == "ready"
                watch = EvaluationLaunchWatch(set(), ("/nowhere/torch/",), ())
                started = time.perf_counter()
                assert watch.start(child.pid), watch.refused
                opened = time.perf_counter()
                events = watch.events
                watch.take(1, UNTIMED)
                taken = time.perf_counter()
                watch.close()
                closed = time.perf_counter()
                print(f"| {threads + 1} | {events} | {opened - started:.3f} | {taken - opened:.3f} | "
                      f"{closed - taken:.3f} |", flush=True)
            finally:
                child.stdin.write("end\n")
                child.stdin.flush()
                child.wait(timeout=60)


if __name__ == "__main__":
    main()
