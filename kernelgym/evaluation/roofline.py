"""Roofline: a task's FLOPs and minimum bytes, the machine's measured peaks, and the floor time they imply.

FLOPs come from torch.utils.flop_counter (matmuls and convolutions; elementwise work counts as 0, so such
tasks are memory-bound by construction). Minimum bytes are what any implementation must move: inputs,
parameters and outputs, each once. Peaks are measured on the machine (a large copy, a large fp32 matmul)
once per hardware/software fingerprint and cached.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import torch

from kernelgym.evaluation.baselines import JsonCache


@dataclass
class Peaks:
    bandwidth_gbs: float  # GB/s, from a copy of a buffer far larger than any cache
    matmul_tflops: float  # a matmul in the run's dtype (fp32 unless the run is bf16/fp16), TFLOP/s


@dataclass
class TaskCost:
    flops: float
    min_bytes: float


def task_cost(model: torch.nn.Module, inputs: list, outputs: list, backward_inputs: int = 0) -> TaskCost:
    """A backward task's inputs end with its upstream gradients (`backward_inputs` items, forward's inputs
    before them) and its outputs hold the gradients: every one is moved once. Its FLOPs are three times the
    forward's (each product of the forward has two in the backward: the input's gradient and the weight's;
    the counter cannot follow autograd.grad)."""
    from torch.utils.flop_counter import FlopCounterMode

    forward_inputs = inputs[:len(inputs) - backward_inputs]
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(*forward_inputs)
    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    tensors += list(model.parameters()) + list(model.buffers())
    moved = sum(t.numel() * t.element_size() for t in tensors)
    moved += sum(o.numel() * o.element_size() for o in outputs if isinstance(o, torch.Tensor))
    flops = float(counter.get_total_flops()) * (3 if backward_inputs else 1)
    return TaskCost(flops=flops, min_bytes=float(moved))


def measure_peaks(device: str, dtype: str = "float32") -> Peaks:
    """About a second of work: a 256 MB copy (64 MB on CPU) and a matmul in `dtype` (4096; 1024 on CPU)."""
    gpu = device.startswith("cuda")
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    n_bytes = (256 if gpu else 64) << 20
    src = torch.empty(n_bytes // 4, dtype=torch.float32, device=device).fill_(1.0)
    dst = torch.empty_like(src)

    def best(fn, repeats):
        fn()
        sync()
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            fn()
            sync()
            times.append(time.perf_counter() - start)
        return min(times)

    copy_s = best(lambda: dst.copy_(src), 10)
    size = 4096 if gpu else 1024
    a = torch.rand(size, size, device=device).to(getattr(torch, dtype))
    b = torch.rand(size, size, device=device).to(getattr(torch, dtype))
    matmul_s = best(lambda: torch.mm(a, b), 5)
    return Peaks(bandwidth_gbs=2 * n_bytes / copy_s / 1e9, matmul_tflops=2 * size**3 / matmul_s / 1e12)


def floor_ms(cost: TaskCost, peaks: Peaks) -> tuple[float, str]:
    """The least time the task could take on this machine, and whether memory or compute bounds it."""
    memory_ms = cost.min_bytes / (peaks.bandwidth_gbs * 1e9) * 1e3
    compute_ms = cost.flops / (peaks.matmul_tflops * 1e12) * 1e3
    return (memory_ms, "memory") if memory_ms >= compute_ms else (compute_ms, "compute")


class RecordCache(JsonCache):
    """One dataclass record per key: the machine's measured peaks per fingerprint (`Peaks`), a task's counted
    FLOPs and bytes per task source, dtype and pass (`TaskCost`: counting runs the FLOP counter, whose first
    use in a process imports torch._dynamo, about a second, so each task is counted once per machine)."""

    def __init__(self, path, record: type):
        super().__init__(path)
        self.record = record

    def get(self, key: str):
        data = self.get_raw(key)
        try:
            return self.record(**data) if isinstance(data, dict) else None
        except TypeError:  # written by another version of the record
            return None

    def put(self, key: str, value) -> None:
        self.put_raw(key, asdict(value))
