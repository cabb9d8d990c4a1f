"""What both forked evaluation processes share: the job they are given and the batch code they both run.

Both sides run the same batch code (`run_batch`), so the fixed cost the trusted clock sees is the same on
each. Nothing here decides anything and nothing here is timed: the worker's clock runs around each batch, the
worker reads the candidate's outputs itself, and the reference process compares them. The two sides are
workers/reference_side.py (trusted, never sees candidate code) and workers/candidate_side.py (may be fully
controlled by the candidate); neither imports the other.
"""

from __future__ import annotations

import importlib.util
import mmap
import os
import sys
import traceback
import types
from dataclasses import dataclass, field

import torch

from kernelgym import kernels
from kernelgym.evaluation import timing as timing_mod
from kernelgym.workers import messages as m
from kernelgym.workers import protocol

ARENA_ALIGN = 64


@dataclass
class ChildJob:
    """What a forked process needs; built by the trusted worker, never by the candidate."""

    task_source: str  # the module at the chosen size
    solution_source: str
    backend: str
    device: str  # "cpu" or "cuda"
    mode: str  # "run", "interpret" (Triton without GPU), "compile" (CUDA without GPU)
    dtype: str
    init_seed: int
    perturb: str
    threads: int = 1
    roofline: bool = True  # the reference process reports the task's FLOPs and bytes (and peaks, if asked)
    cached_peaks: dict | None = None
    cached_cost: dict | None = None  # the task's FLOPs and bytes, counted in an earlier evaluation
    timing_config: timing_mod.TimingConfig = field(default_factory=timing_mod.TimingConfig)
    compile_baseline: bool = False
    trial_seeds: list[int] = field(default_factory=list)  # baselines only
    perturbed: list[bool] = field(default_factory=list)
    backward: bool = False  # forward and backward: every call also returns autograd's gradients
    # the candidate's new heap memory filled with bytes 0x7f (glibc's M_PERTURB) before its code runs: a
    # replay's processes are fresh, and a kernel that reads an output it never wrote (y += a + b into
    # torch.empty) must fail there as it failed later in its first processes' recycled memory
    fill_new_memory: bool = False


# helpers of both sides ---------------------------------------------------------------------------------

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_PERTURB = -1, -3, -6  # glibc's mallopt options


def mallopt(*settings: tuple[int, int]) -> None:
    """glibc's malloc settings, (option, value) each; nothing where libc is not glibc (its own policy then
    applies to both sides alike)."""
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        for option, value in settings:
            libc.mallopt(option, value)
    except (OSError, AttributeError):
        pass


def load_module(source: str, name: str, path: str | None = None) -> types.ModuleType:
    """Import `source` as a module; from a real file when given (Triton needs the source on disk)."""
    if path is not None:
        with open(path, "w", encoding="utf-8", errors="surrogatepass") as f:
            f.write(source)
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
    module = types.ModuleType(name)
    module.__file__ = f"<{name}>"
    sys.modules[name] = module
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)  # noqa: S102 - task code, in its own process
    return module


def make_inputs(task_module, seed: int, perturbed: bool, perturb: str, dtype: torch.dtype,
                device: str) -> list:
    torch.manual_seed(seed)
    with torch.device(device):  # factories allocate on the run's device: no host copy of GBs
        inputs = list(task_module.get_inputs())
    if perturbed and perturb != "none":
        gen = torch.Generator().manual_seed(seed ^ 0x5EED)
        scale = float(torch.empty(()).uniform_(1.5, 4.0, generator=gen))
        # Always a negative shift: all-positive inputs (torch.rand) must reach negative values, or a kernel
        # that ignores the negative branch (ReLU for LeakyReLU) would pass.
        shift = 0.0 if perturb == "positive" else float(torch.empty(()).uniform_(-1.5, -0.25, generator=gen))
        inputs = [x * scale + shift if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                  for x in inputs]
    # Integer inputs (targets, indices) keep their dtype whatever the run's float dtype is.
    return [x.to(device=device, dtype=dtype) if isinstance(x, torch.Tensor) and x.is_floating_point()
            else x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]


def build_model(cls, init_args: list, seed: int, dtype: torch.dtype, device: str):
    torch.manual_seed(seed)
    return cls(*init_args).to(device=device, dtype=dtype)


def error_meta(stage: str, exc: BaseException) -> m.Failed:
    message = f"{type(exc).__name__}: {exc}"
    tb = traceback.extract_tb(exc.__traceback__)
    # The candidate's own frames: the lines an agent can act on.
    frames = [f"  line {f.lineno} in {f.name}: {f.line}" for f in tb
              if f.filename.endswith("solution.py")][-4:]
    kind = "runtime"
    if isinstance(exc, kernels.BuildError) or "Error building extension" in message:
        kind = "compile"
    elif (isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in message.lower()
          or _oom_report_failed(message)):
        kind = "oom"
    elif "CUDA error" in message or "cudaError" in message or "illegal memory access" in message:
        kind = "cuda"
    return m.Failed(stage, kind, message[:4000], frames, getattr(exc, "log", "")[-20000:])


def _oom_report_failed(message: str) -> bool:
    """PyTorch's caching allocator asks NVML who holds the memory only when an allocation failed; where NVML
    cannot start (seen in the candidate's namespaces on the H200 host: an INTERNAL ASSERT on nvmlInit) that
    assert replaces the out-of-memory error it was writing."""
    return "CUDACachingAllocator" in message and "nvmlInit" in message


def strict_fp32() -> None:
    """Full-precision math for reference and candidate alike (cuDNN convolutions default to TF32; half
    matmuls may reduce in half precision)."""
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False


def lowered_precision(dtype: str = "float32") -> bool:
    """Whether a precision flag that matters for the run's dtype was switched on."""
    matmul = torch.backends.cuda.matmul
    if dtype == "float16":
        return bool(matmul.allow_fp16_reduced_precision_reduction)
    if dtype == "bfloat16":
        return bool(matmul.allow_bf16_reduced_precision_reduction)
    return bool(torch.backends.cudnn.allow_tf32 or matmul.allow_tf32
                or torch.get_float32_matmul_precision() != "highest")


def as_list(out) -> list:
    return list(out) if isinstance(out, tuple | list) else [out]


def value_to_wire(value) -> dict:
    if isinstance(value, torch.Tensor):
        meta, data = protocol.tensor_to_wire(value)
        return {"tensor": meta, "hex": bytes(data).hex()}
    if isinstance(value, bool | int | float | str) or value is None:
        return {"value": value}
    if isinstance(value, list | tuple):
        return {"list": [value_to_wire(v) for v in value]}
    raise TypeError(f"get_init_inputs() returned a {type(value).__name__}")


def value_from_wire(item: dict):
    if "tensor" in item:
        return protocol.tensor_from_wire(item["tensor"], bytearray.fromhex(item["hex"])).clone()
    if "list" in item:
        return [value_from_wire(v) for v in item["list"]]
    return item.get("value")


# the batch: identical on both sides ------------------------------------------------------------------------

def map_arena(fd: int, layout: list[list[dict]]) -> tuple[mmap.mmap | None, list[list]]:
    """Input sets from a sealed memfd, mapped copy-on-write: writes stay private, the arena stays pristine."""
    size = os.fstat(fd).st_size
    # Not prefaulted: MAP_POPULATE measured at about 7 ms for 4 MB here, while faulting the pages in as the
    # kernel reads them costs next to nothing (both sides pay it alike).
    flags = mmap.MAP_PRIVATE
    arena = mmap.mmap(fd, size, flags=flags, prot=mmap.PROT_READ | mmap.PROT_WRITE) if size else None
    os.close(fd)
    calls = []
    for items in layout:
        inputs = []
        for item in items:
            if "offset" in item:
                dtype = getattr(torch, item["dtype"])
                count = 1
                for s in item["shape"]:
                    count *= int(s)
                nbytes = count * torch.empty((), dtype=dtype).element_size()
                flat = torch.frombuffer(arena, dtype=torch.uint8, count=nbytes, offset=int(item["offset"])) \
                    if nbytes else torch.empty(0, dtype=torch.uint8)
                inputs.append(flat.view(dtype).reshape(item["shape"]))
            else:
                inputs.append(item.get("value"))
        calls.append(inputs)
    return arena, calls


def map_ipc(ipc: list[list[dict]], device: str) -> list[list]:
    return [[protocol.cuda_tensor_from_wire(item, device) if "ipc" in item else item.get("value")
             for item in items]
            for items in ipc]


class BackwardPass:
    """Backward tasks: each input set ends with the upstream gradients and their count; a call returns the
    forward's outputs, then the gradients of the float inputs, then those of the parameters (in order)."""

    def __init__(self, count=lambda: 0):
        self.count = count  # the solution's own kernel calls so far
        self.kernel_calls = 0  # of those, made while autograd ran the backward

    def __call__(self, model, args: list) -> list:
        upstream_count = int(args[-1])
        upstream = args[len(args) - 1 - upstream_count:-1]
        leaves = [x.detach().requires_grad_() if is_float(x) else x
                  for x in args[:len(args) - 1 - upstream_count]]
        wrt = [x for x in leaves if is_float(x)] + list(model.parameters())
        with torch.enable_grad():
            outs = as_list(model(*leaves))
            detached = [k for k, o in enumerate(outs) if isinstance(o, torch.Tensor) and o.grad_fn is None
                        and not o.requires_grad]
            if detached:
                raise RuntimeError(f"output {detached[0]} is not attached to autograd: a backward task's "
                                   "ModelNew returns outputs autograd can differentiate (a "
                                   "torch.autograd.Function whose backward runs your kernels)")
            before = self.count()
            grads = torch.autograd.grad(outs, wrt, upstream, allow_unused=True, materialize_grads=True)
            self.kernel_calls += self.count() - before
        # A gradient that is the upstream gradient itself (an identity's backward, autograd's own included)
        # is copied on either side alike: an output in an input's memory is a rule of its own.
        given = {x.untyped_storage().data_ptr() for x in args if isinstance(x, torch.Tensor)}
        grads = [g.clone() if g.untyped_storage().data_ptr() in given else g for g in grads]
        return [o.detach() if isinstance(o, torch.Tensor) else o for o in outs] + grads


class _NoWork(torch.autograd.Function):
    """Autograd's round trip through Python with no work on either pass."""

    @staticmethod
    def forward(ctx, shapes, anchor, *leaves):
        ctx.inputs = 2 + len(leaves)
        return tuple(anchor.new_empty(shape) for shape in shapes)

    @staticmethod
    def backward(ctx, *grads):
        return (None,) * ctx.inputs


class NoWorkModel(torch.nn.Module):
    """A stand-in ModelNew that computes nothing, with a call's output shapes: what the batch's harness and
    PyTorch's call machinery (a module call; for a backward task, autograd's round trip through a Python
    autograd.Function) cost any solution, measured beside the candidate's batch by the in-process profile."""

    def __init__(self, calls: list[list], backward: bool, device: str):
        super().__init__()
        self.anchor = torch.nn.Parameter(torch.zeros(1, device=device))
        first = calls[0] if calls else [0]
        count = int(first[-1]) if backward else 0
        self.shapes = [tuple(x.shape) for x in first[len(first) - 1 - count:-1]] if count else [(0,)]

    def forward(self, *inputs):
        if not torch.is_grad_enabled():
            return self.anchor.new_empty(self.shapes[0])
        return _NoWork.apply(self.shapes, self.anchor, *[x for x in inputs if is_float(x)])


def is_float(x) -> bool:
    return isinstance(x, torch.Tensor) and x.is_floating_point()


def upstream_grads(seed: int, shapes: list, dtype: torch.dtype, device: str) -> list:
    """The upstream gradient of each output, drawn from the trusted side's seed, and their count."""
    # Drawn on the run's device: drawn on the host, a GPU-sized gradient took 0.3 s a call, and a timed
    # batch of 64 calls held the GPU's timing slot for seconds.
    gen = torch.Generator(device=device).manual_seed(seed ^ 0xBAC4)
    return [torch.randn(list(shape), generator=gen, device=device).to(dtype=dtype) for shape in shapes] + \
        [len(shapes)]


def run_batch(model, calls: list[list], device: str, backward: BackwardPass | None = None) -> list:
    """The timed work: forward (and, for a backward task, autograd's backward) once per input set, then wait
    for the device. Nothing else."""
    outputs = []
    if backward is not None:
        for inputs in calls:
            outputs.append(backward(model, inputs))
    else:
        with torch.no_grad():
            for inputs in calls:
                outputs.append(model(*inputs))
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return outputs


def describe_outputs(outputs: list, device: str, keep: list, export: bool = True,
                     calls: list[list] | None = None) -> list[list[dict]]:
    """Where each output lies, for the trusted side to read: an address (CPU) or an IPC handle (GPU).
    The reference's side does not export (nobody maps its outputs; unconsumed exports pile up in torch).
    On the GPU an output that is an input (or a view of one) is said so: torch cannot re-export memory it
    mapped from another process, and the honest answer is the rule, not torch's error. (The trusted side
    also compares handles, for a candidate that would not say so.)"""
    described = []
    for index, out in enumerate(outputs):
        items = []
        input_storages = {x.untyped_storage().data_ptr() for x in (calls[index] if calls else [])
                          if isinstance(x, torch.Tensor) and x.is_cuda}
        for item in as_list(out):
            if type(item) is not torch.Tensor:
                what = "a subclass of Tensor" if isinstance(item, torch.Tensor) else "not a tensor"
                items.append({"error": f"output is a {type(item).__name__}, {what}"})
                continue
            if item.is_cuda and item.untyped_storage().data_ptr() in input_storages:
                items.append({"error": "an output shares memory with an input", "aliases_input": True})
                continue
            dense = item if item.is_contiguous() else item.contiguous()
            keep.append(dense)
            wire = {"dtype": str(item.dtype).removeprefix("torch."), "shape": list(item.shape)}
            if dense.is_cuda and dense.numel() and export:
                wire.update(protocol.cuda_tensor_to_wire(dense, keep))
            else:
                wire.update(ptr=dense.data_ptr(), nbytes=dense.numel() * dense.element_size())
            items.append(wire)
        described.append(items)
    return described
