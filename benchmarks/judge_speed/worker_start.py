"""Where a worker's start goes: each step of `kernelgym.workers.worker._preimport`, timed in a fresh process.

    python benchmarks/judge_speed/worker_start.py          # the steps one by one, as a worker runs them
    python benchmarks/judge_speed/worker_start.py --whole  # the worker's own _preimport as one figure

A pool's worker starts before its first evaluation, so on a one-file `kernelgym eval` this is most of the
command's time beyond the evaluation. On a GPU host the Triton steps compile for the GPU's target; nothing
here initializes CUDA (as in the worker).
"""

from __future__ import annotations

import argparse
import importlib
import os
import time

STEPS = ["numpy", "kernelgym.evaluation.profile", "kernelgym.evaluation.compare", "torch.profiler",
         "torch.utils.cpp_extension", "triton",
         "triton.language"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--whole", action="store_true", help="time _preimport as the worker calls it")
    parser.add_argument("--gpu", action="store_true", help="as on a GPU host (default: nvidia-smi exists)")
    args = parser.parse_args()
    has_gpu = args.gpu or any(os.access(os.path.join(d, "nvidia-smi"), os.X_OK)
                              for d in os.environ.get("PATH", "").split(os.pathsep))
    started = time.perf_counter()
    marks: list[tuple[str, float]] = []

    def mark(name: str) -> None:
        marks.append((name, time.perf_counter() - started))

    import torch  # noqa: F401

    mark("torch")
    from kernelgym.workers import worker

    if args.whole:
        worker._preimport(has_gpu)
        mark(f"_preimport(has_gpu={has_gpu})")
    else:
        if not has_gpu:
            os.environ["TRITON_INTERPRET"] = "1"
        for name in STEPS:
            importlib.import_module(name)
            mark(name)
        if has_gpu:
            from kernelgym.workers.triton_warm import gpu_capability, warm_compiler

            worker._build_triton_driver()
            mark("Triton's driver helper")
            capability = gpu_capability()
            mark("nvidia-smi: compute capability")
            warm_compiler(capability)
            mark("Triton compiler warm-up")
        from kernelgym.evaluation.profile import warm_up

        warm_up()
        mark("profile warm-up")
    print("| step | ends at s | step s |\n| --- | --- | --- |")
    last = 0.0
    for name, at in marks:
        print(f"| {name} | {at:.3f} | {at - last:.3f} |")
        last = at


if __name__ == "__main__":
    main()
