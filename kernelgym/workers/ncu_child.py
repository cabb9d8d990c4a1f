"""The process Nsight Compute profiles: one forward call of an already judged candidate, in the sandbox.

    ncu ... python -m kernelgym.workers.ncu_child JOB_DIR      (JOB_DIR/job.json written by evaluation.ncu)

Builds are looked up in kernelgym's cache only (the judged evaluation built them); nothing compiles here.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def _cached_native(request):
    from kernelgym import kernels

    path = kernels.library_path(request)
    if not path.exists():
        raise kernels.BuildError(_NOT_CACHED, "")
    return path


def _cached_extension(request):
    from kernelgym import kernels
    from kernelgym.build import torch_ext

    if not torch_ext.is_built(request):
        raise kernels.BuildError(_NOT_CACHED, "")
    return torch_ext.extension_dir(request)


_NOT_CACHED = "not in kernelgym's build cache (ncu runs only judged, built candidates)"


def main(job_dir: str) -> int:
    job = json.loads(Path(job_dir, "job.json").read_text())
    Path(job_dir, "child.pid").write_text(str(os.getpid()))  # the sandbox gives it a session of its own
    import torch

    from kernelgym.workers.sandbox import SandboxConfig, enter

    # CUDA (and with it ncu's injected profiler, which talks to the ncu front end) starts before the sandbox:
    # the first try, with the sandbox entered first, ran past its time limit on the H200 host, most likely
    # because a new network namespace cuts the profiler off from the front end.
    torch.cuda.init()
    torch.empty(1, device="cuda")
    log_fd = os.open(os.path.join(job_dir, "output.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    enter(job_dir, log_fd, SandboxConfig(**job["sandbox"]), uses_gpu=True)

    from torch.utils import cpp_extension

    from kernelgym import kernels
    from kernelgym.build import torch_ext
    from kernelgym.workers.child import build_model, load_module, make_inputs, strict_fp32

    strict_fp32()
    kernels.remote_builder = _cached_native
    kernels.remote_extension_builder = _cached_extension
    cpp_extension.load_inline = torch_ext.load_inline
    dtype = getattr(torch, job["dtype"])
    task = load_module(job["task_source"], "kernelgym_task")
    solution = load_module(job["solution_source"], "solution", os.path.join(job_dir, "solution.py"))
    torch.manual_seed(job["init_seed"])
    model = build_model(solution.ModelNew, list(task.get_init_inputs()), job["init_seed"], dtype, "cuda")
    inputs = make_inputs(task, job["input_seed"], False, job["perturb"], dtype, "cuda")
    with torch.no_grad():
        for _ in range(2):  # JIT compilation and one-time setup stay outside the profiled call
            model(*inputs)
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStart()
        model(*inputs)
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
