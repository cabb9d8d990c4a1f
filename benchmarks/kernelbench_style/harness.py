"""A plain KernelBench-style evaluation, for comparison: one fresh process, the solution imported in the same
process as the reference, 5 correctness trials (atol = rtol = 1e-2, as KernelBench), then 100 timed trials
with CUDA events on the current stream (or a wall clock on the CPU). Prints one JSON line.
Usage: python harness.py TASK_FILE SOLUTION_FILE DEVICE
"""

import importlib.util
import json
import sys
import time

start = time.perf_counter()
import torch


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(task_path, solution_path, device):
    task = load(task_path, "task")
    torch.manual_seed(0)
    init = task.get_init_inputs()
    torch.manual_seed(0)
    ref = task.Model(*init).to(device)
    build_start = time.perf_counter()
    solution = load(solution_path, "solution")
    build_s = time.perf_counter() - build_start
    torch.manual_seed(0)
    new = solution.ModelNew(*init).to(device)
    correct = True
    with torch.no_grad():
        for trial in range(5):
            torch.manual_seed(trial)
            inputs = [x.to(device) for x in task.get_inputs()]
            correct &= torch.allclose(ref(*inputs), new(*inputs), atol=1e-2, rtol=1e-2)
        times = {}
        for name, model in (("ref", ref), ("new", new)):
            samples = []
            for _ in range(3):
                model(*inputs)
            for _ in range(100):
                if device == "cuda":
                    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    begin.record()
                    model(*inputs)
                    end.record()
                    torch.cuda.synchronize()
                    samples.append(begin.elapsed_time(end))
                else:
                    t0 = time.perf_counter()
                    model(*inputs)
                    samples.append((time.perf_counter() - t0) * 1e3)
            times[name] = sum(samples) / len(samples)
    print(json.dumps({"correct": bool(correct), "speedup": times["ref"] / times["new"],
                      "ref_ms": times["ref"], "new_ms": times["new"], "build_s": build_s,
                      "wall_s": time.perf_counter() - start}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
