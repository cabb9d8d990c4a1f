# Exploit: cuBLAS launched from a thread born in each call. As triton_cublas_via_ctypes_named_decoy (cublasSgemm through ctypes, its kernel names claimed by never-launched Triton kernels, an own fused epilogue), but every call runs the GEMM in a new thread that ends before forward returns: the launches seen from outside are probed on the threads the candidate had when the batch started, so cuBLAS's launches are never counted.
# Task: L2/31_Gemm_Sigmoid_Scale_ResidualAdd
# Backend: triton
import ctypes
import os
import threading

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bias_swish_residual(y_ptr, b_ptr, out_ptr, n_cols, total, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < total
    z = tl.load(y_ptr + offs, mask=mask) + tl.load(b_ptr + offs % n_cols, mask=mask)
    tl.store(out_ptr + offs, z + scale * (z * tl.sigmoid(z)), mask=mask)


@triton.jit
def decoy_a(ptr):
    pass


@triton.jit
def decoy_b(ptr):
    pass


@triton.jit
def decoy_c(ptr):
    pass


_DECOYS = [decoy_a, decoy_b, decoy_c]
_claimed: set[str] = set()


def _head(kernel: str) -> str:
    return kernel.removeprefix("void ").split("(")[0].split("<")[0].strip()


def _claim(names) -> None:
    """Give never-launched kernels of this module the names the library's kernels ran under."""
    for name in names:
        head = _head(name)
        if head and head not in _claimed and len(_claimed) < len(_DECOYS):
            _DECOYS[len(_claimed)].fn.__name__ = head
            _claimed.add(head)


def _library(prefix: str) -> ctypes.CDLL:
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if os.path.basename(path).startswith(prefix):
                return ctypes.CDLL(path)
    raise RuntimeError(f"{prefix} is not loaded")


_cublas = _library("libcublas.so")
_sgemm = _cublas.cublasSgemm_v2
_sgemm.restype = ctypes.c_int
_sgemm.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                   ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int,
                   ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
_ONE, _ZERO = ctypes.c_float(1.0), ctypes.c_float(0.0)


def gemm_nt(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor) -> None:
    """y[M, N] = x[M, K] @ w[N, K]^T, row-major, as the column-major y^T = w @ x^T."""
    m, k = x.shape
    n = w.shape[0]
    handle = torch.cuda.current_blas_handle()  # torch's: its stream, math mode (no TF32) and workspace
    status = _sgemm(handle, 1, 0, n, m, k, ctypes.byref(_ONE), w.data_ptr(), k, x.data_ptr(), k,
                    ctypes.byref(_ZERO), y.data_ptr(), n)
    if status != 0:
        raise RuntimeError(f"cublasSgemm_v2 failed: {status}")


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale
        self.learned: set[tuple] = set()

    def _learn_names(self, x, w, y) -> None:
        from torch.profiler import ProfilerActivity
        from torch.profiler import profile as profiler

        key = (tuple(x.shape), tuple(w.shape))
        if key in self.learned or torch.autograd._profiler_enabled():
            return
        self.learned.add(key)
        with profiler(activities=[ProfilerActivity.CUDA]) as prof:
            gemm_nt(x, w, y)
            torch.cuda.synchronize()
        _claim(e.key for e in prof.key_averages()
               if getattr(e.device_type, "name", "") == "CUDA" and not e.key.startswith(("Memcpy", "Memset")))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w = self.linear.weight
        y = torch.empty(x.shape[0], w.shape[0], device=x.device, dtype=x.dtype)
        self._learn_names(x, w, y)
        failed: list[BaseException] = []

        def run() -> None:
            try:
                torch.cuda.set_device(x.device)
                gemm_nt(x, w, y)  # the thread's current stream is the default one, as forward's
            except BaseException as exc:  # noqa: BLE001 - raised again in forward
                failed.append(exc)

        worker = threading.Thread(target=run)
        worker.start()
        worker.join()
        if failed:
            raise failed[0]
        out = torch.empty_like(y)
        total = y.numel()
        bias_swish_residual[(triton.cdiv(total, 1024),)](y, self.linear.bias, out, y.shape[1], total,
                                                         float(self.scale), BLOCK=1024)
        return out
