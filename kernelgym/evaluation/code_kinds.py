"""What kind of code an instruction pointer fell in, for the own-code evidence (evaluation/own_code.py): each
file mapped in the candidate is one kind, and a function of PyTorch's is compute or housekeeping.

- own: a library the trusted worker built for this solution (the paths its build service answered);
- torch: PyTorch's own libraries (ATen's kernels, MKL and oneDNN inside them, its OpenMP);
- glue: the Python interpreter and the C library (calling, allocating, copying: no kernel's work);
- other: any other code: numpy or another library, executable memory without a file, addresses that no
  mapping held at stop, an own library's file mapped outside its loaded image or its code written since
  (evaluation/own_images.py).
"""

from __future__ import annotations

import os
import sys

from kernelgym.evaluation.ip_sampler import ANON_EXEC, KERNEL, UNMAPPED, executable_mappings_at
from kernelgym.evaluation.own_images import REMAPPED, WRITTEN

OWN, TORCH, GLUE, OTHER = "own", "torch", "glue", "other"
_TORCH_GLUE = ("libc10.", "libtorch_python", "libgomp", "libshm", "libiomp")
# libmvec: glibc's vector math, which -ffast-math turns a solution's own std::exp loop into (like libm's
# scalar calls); libgomp: the OpenMP runtime a -fopenmp solution links (torch's own copy is above).
_GLUE_LIBS = ("libc.so", "libc-", "libm.so", "libm-", "libmvec", "ld-linux", "libpthread", "libdl", "librt",
              "libstdc++", "libgcc_s", "libutil", "libpython", "libz.so", "libgomp")
# A name proves nothing: any library copied into the candidate's folder as "libm.so.6-x" would pass (a red
# team's OpenBLAS did). Such a name is glue only for a file the system installed, or one the trusted process
# maps itself (a Python or C++ runtime outside the system folders), told by device and inode.
_SYSTEM_LIB_FOLDERS = ("/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/")


def torch_folders() -> tuple[str, ...]:
    import torch

    folder = os.path.realpath(os.path.dirname(torch.__file__))
    return (folder + os.sep, folder + ".libs" + os.sep)


def _python_files() -> tuple[str, ...]:
    exe = os.path.realpath(sys.executable)
    dynload = os.path.join(sys.base_prefix, "lib", f"python{sys.version_info[0]}.{sys.version_info[1]}",
                           "lib-dynload") + os.sep
    return exe, os.path.realpath(dynload.rstrip(os.sep)) + os.sep


def _file_id(path: str) -> tuple[int, int] | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _mapped_file_ids(pid: int) -> set[tuple[int, int]]:
    """(device, inode) of every executable file mapped in the process."""
    ids = {_file_id(path) for _, _, path, _ in executable_mappings_at(pid) if path.startswith("/")}
    ids.discard(None)
    return ids


def readable(symbol: str) -> str:
    """A short name for a (mangled) function of PyTorch's: the kernel it belongs to where one is named
    (ATen's loops are lambdas inside `<op>_kernel`), else its last plain identifier."""
    if not symbol.startswith("_Z"):
        return symbol[:80]
    words, i = [], 2
    while i < len(symbol):  # Itanium mangling: each source name is <length><name>
        if symbol[i] in "ST" and i + 1 < len(symbol) and (symbol[i + 1].isalnum() or symbol[i + 1] == "_"):
            end = symbol.find("_", i + 1)  # a substitution (S3_) or template parameter (T0_): no name
            if end != -1 and symbol[i + 1:end].isalnum() and symbol[i + 1:end].upper() == symbol[i + 1:end]:
                i = end + 1
                continue
        if not symbol[i].isdigit():
            i += 1
            continue
        j = i
        while j < len(symbol) and symbol[j].isdigit():
            j += 1
        length = int(symbol[i:j])
        word = symbol[j:j + length]
        if length and len(word) == length and word.isidentifier():
            words.append(word)
            i = j + length
        else:
            i = j
    kernels = [w for w in words if "kernel" in w or "impl" in w or "gemm" in w]
    return (kernels[-1] if kernels else max(words, key=len, default=symbol))[:80]


class Classifier:
    """Which kind of code a mapped file is, for one evaluation (its own libraries are the built ones)."""

    def __init__(self) -> None:
        self.own: set[str] = set()
        self._torch = torch_folders()
        self._python = _python_files()
        self._seen: dict[str, str] = {}
        self._trusted_maps: set[tuple[int, int]] | None = None  # files this (trusted) process maps

    def add_built(self, path: str) -> None:
        """A path the build service answered: a library, or a folder holding the extension's libraries."""
        real = os.path.realpath(path)
        if os.path.isdir(real):
            self.own |= {os.path.join(real, n) for n in os.listdir(real) if ".so" in n}
        else:
            self.own.add(real)
        self._seen.clear()

    def classify(self, path: str) -> str:
        kind = self._seen.get(path)
        if kind is None:
            kind = self._seen[path] = self._kind(path)
        return kind

    def _kind(self, path: str) -> str:
        if path in (ANON_EXEC, UNMAPPED, REMAPPED, WRITTEN):
            return OTHER
        if path == KERNEL or path.startswith("[v"):  # [vdso], [vsyscall]: the clock's fast path
            return GLUE
        real = os.path.realpath(path)
        if real in self.own:
            return OWN
        if real.startswith(self._torch):
            # c10 (allocator, tensor bookkeeping), the Python bindings and the OpenMP runtime hold no
            # kernel of the task: glue, like the interpreter. Compute is ATen's, told apart by symbol.
            return GLUE if os.path.basename(real).startswith(_TORCH_GLUE) else TORCH
        exe, dynload = self._python
        if real == exe or real.startswith(dynload) or self._runtime_library(real):
            return GLUE
        return OTHER

    def _runtime_library(self, real: str) -> bool:
        if not os.path.basename(real).startswith(_GLUE_LIBS):
            return False
        if real.startswith(_SYSTEM_LIB_FOLDERS):
            return True
        if self._trusted_maps is None:
            self._trusted_maps = _mapped_file_ids(os.getpid())
        return _file_id(real) in self._trusted_maps


# Functions of PyTorch's libraries that allocate, fill, copy or dispatch: work an honest solution asks of
# torch too (its outputs' memory, a zeroed accumulator, a contiguous copy), not the task's compute.
_HOUSEKEEPING = ("fill_kernel", "fill_out", "fill_impl", "zero_", "copy_kernel", "copy_impl", "copy_same",
                 "direct_copy", "copy_", "memset", "memcpy", "empty", "alloc", "Alloc", "resize",
                 "contiguous",
                 "clone", "TensorImpl", "StorageImpl", "intrusive_ptr", "Dispatcher", "OperatorHandle",
                 "KernelFunction", "THPVariable", "pybind11", "PyObject", "dispatch_", "OperatorEntry",
                 "DispatchKey", "AutogradMeta", "VariableType", "OptionalTensorRef",
                 # views, as mangled identifiers (length-prefixed: exact names only): a solution that calls
                 # its kernel per row in Python selects each row (a helper's honest loops spent 13-20% here)
                 "13select_symint", "21as_strided_tensorimpl", "28alias_with_sizes_and_strides",
                 "14_reshape_alias")


# Compute libraries linked into PyTorch: all their code is compute (BLAS's packing, "scopy", is its GEMM's).
_BLAS = ("mkl_", "dnnl", "jit_", "openblas", "sgemm", "dgemm", "fbgemm", "xnn_")


# SLEEF, PyTorch's vector math (exp, tanh...): what a solution's own `at::vec::Vectorized` loop calls, as
# a -ffast-math loop calls glibc's libmvec. Elementwise math, never a task's whole compute: a helper's
# honest at::vec Sigmoid spent 42% in Sleef_expf8 and was judged torch_compute.
_VECTOR_MATH = ("Sleef_",)


# ATen's kernels live in at::native (mangled "2at6native"; its loops are lambdas named after them). The rest
# of libtorch (dispatch, autograd's engine, thread-local state, tensor bookkeeping) runs no kernel.
_ATEN_KERNELS = "6native"


def is_housekeeping(name: str) -> bool:
    """Whether a function of PyTorch's is not the task's compute. An unnamed one counts as compute."""
    if name.startswith(_VECTOR_MATH):
        return True
    if not name or any(token in name for token in _BLAS):
        return False
    return _ATEN_KERNELS not in name or any(token in name for token in _HOUSEKEEPING)
