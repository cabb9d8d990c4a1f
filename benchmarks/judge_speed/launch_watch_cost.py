"""What the GPU launch evidence costs, measured without a GPU (issue 28): a stand-in CUDA runtime library
exporting the probed launch entries, loaded by a child with N idle threads; LaunchWatch's start and the
parts of stopping it (disable, read, close the perf events) timed on it, then a whole LaunchWatch.stop()
(which leaves the close to a background thread).

    python benchmarks/judge_speed/launch_watch_cost.py [--threads 1,10,30]
"""

from __future__ import annotations

import argparse
import fcntl
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kernelgym.evaluation.ip_sampler import PERF_EVENT_IOC_DISABLE
from kernelgym.evaluation.launches import GRAPH_ENTRIES, RUNTIME_ENTRIES, LaunchWatch

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
    (folder / "rt.c").write_text("".join(entry.format(name) for name in RUNTIME_ENTRIES + GRAPH_ENTRIES
                                         if name.startswith("cuda")))
    library = folder / "libcudart.so.13"
    subprocess.run(["gcc", "-O2", "-fPIC", "-shared", str(folder / "rt.c"), "-o", str(library)], check=True)
    return library


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", default="1,10,30")
    args = parser.parse_args()
    print("| threads in the target | perf events | start s | disable s | read s | close s | "
          "LaunchWatch.stop s (what the evaluation waits) |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        library = stand_in(Path(folder))
        for threads in (int(n) for n in args.threads.split(",")):
            child = subprocess.Popen([sys.executable, "-c", CHILD, str(library), str(threads)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            try:
                assert child.stdout.readline().strip() == "ready"
                watch = LaunchWatch()
                started = time.perf_counter()
                assert watch.start(child.pid), watch.refused
                opened = time.perf_counter()
                rings = [ring for probe, _ in watch._probes for ring in probe._rings]
                for ring in rings:
                    fcntl.ioctl(ring.fd, PERF_EVENT_IOC_DISABLE, 0)
                disabled = time.perf_counter()
                for ring in rings:
                    ring.take()
                read = time.perf_counter()
                watch.close()
                closed = time.perf_counter()
                again = LaunchWatch()
                assert again.start(child.pid), again.refused
                before_stop = time.perf_counter()
                again.stop()
                stopped = time.perf_counter()
                print(f"| {threads + 1} | {len(rings)} | {opened - started:.3f} | {disabled - opened:.3f} | "
                      f"{read - disabled:.3f} | {closed - read:.3f} | {stopped - before_stop:.3f} |",
                      flush=True)
            finally:
                child.stdin.write("end\n")
                child.stdin.flush()
                child.wait(timeout=60)


if __name__ == "__main__":
    main()
