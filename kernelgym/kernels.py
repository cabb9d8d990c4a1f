"""Building native kernels from a solution: the lean C++ and CUDA forms that kernelgym compiles itself.

A solution writes plain C/C++ (or CUDA) with `extern "C"` functions over raw pointers and loads it with
`load_cpp(SOURCE)` / `load_cuda(SOURCE)`. That skips torch's headers, so a new kernel builds in about 0.1 s
(C++) or 1-2 s (CUDA) instead of the 12-40 s a `torch/extension.h` build takes.

Calling convention of the returned library's functions: a `torch.Tensor` is passed as a pointer to its
data (make it contiguous first), a Python `int` as `int64_t`, a `float` as `float`, a `bool` as `int`.
Functions return nothing (`void`). Example::

    lib = load_cpp(r'''
    #include <cstdint>
    extern "C" void relu(const float* x, float* y, int64_t n) {
        #pragma omp parallel for
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
    }''')
    lib.relu(x, y, x.numel())

Inside an evaluation worker the compiler runs in kernelgym's trusted process, not the candidate's, and
artifacts are cached by content (source, flags, compiler, arch), so the same source is never built twice.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kernelgym.errors import KernelGymError

# Bound before any candidate code runs, so a patched `time` cannot change what kernelgym measures.
# CPU time, not wall time: on a loaded machine a preempted kernel must not look like someone else's work.
clock_ns = time.process_time_ns  # the clock of own-kernel time (KernelStats, the extension wrappers)

# Compilers run below normal priority: on a busy machine the evaluation being timed (its reference and
# candidate processes, and the worker that drives them) gets the cores first, and builds take what is left.
BUILD_NICENESS = 10
_NICE = shutil.which("nice")


def niced(argv: list[str]) -> list[str]:
    """`argv` run at BUILD_NICENESS (unchanged where `nice` or the program itself is missing, so that a
    missing compiler is still reported as one)."""
    if _NICE is None or shutil.which(argv[0]) is None:
        return argv
    return [_NICE, "-n", str(BUILD_NICENESS), *argv]

CPP_FLAGS = ("-O3", "-std=c++17", "-fPIC", "-shared", "-fopenmp", "-march=native")
CUDA_FLAGS = ("-O3", "-std=c++17", "-shared", "-Xcompiler", "-fPIC", "-lineinfo")


class BuildError(KernelGymError, RuntimeError):
    """The compiler rejected the source; `log` holds its output."""

    def __init__(self, message: str, log: str):
        super().__init__(message)
        self.log = log


@dataclass(frozen=True)
class BuildRequest:
    language: str  # "cpp" | "cuda"
    source: str
    flags: tuple[str, ...]

    @property
    def key(self) -> str:
        compiler = _compiler_id(self.language)
        text = "\0".join([self.language, self.source, *self.flags, compiler, _arch(self.language)])
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def cache_root() -> Path:
    """$KERNELGYM_CACHE, else ~/.cache/kernelgym; as root /var/cache/kernelgym, which the unprivileged
    candidate process can read (root's home usually cannot be entered by other users)."""
    if os.environ.get("KERNELGYM_CACHE"):
        return Path(os.environ["KERNELGYM_CACHE"])
    if os.geteuid() == 0:
        return Path("/var/cache/kernelgym")
    return Path.home() / ".cache" / "kernelgym"


def _compiler_id(language: str) -> str:
    return shutil.which("nvcc" if language == "cuda" else os.environ.get("CXX", "g++")) or language


def _arch(language: str) -> str:
    if language != "cuda":
        return f"{os.uname().machine}|{cpu_features()}"
    return f"sm_{cuda_arch()}"


@functools.cache
def cpu_features() -> str:
    """The CPU's instruction-set flags as the kernel lists them (/proc/cpuinfo), or "" where it does not.
    C++ is built with -march=native: a library built on a host with AVX-512 dies of SIGILL on one without,
    and one built without it runs the bundled L3 kernels 20-40x slower on one with it (their 16-float
    vectors split into spilled halves), so a cache shared between hosts keys on what `native` meant."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return " ".join(sorted(line.split(":", 1)[1].split()))
    except OSError:
        pass
    return ""


def cuda_arch() -> str:
    """The SM version to build for: TORCH_CUDA_ARCH_LIST's last entry, the visible GPU, else 90 (H200)."""
    listed = os.environ.get("TORCH_CUDA_ARCH_LIST", "").replace("+PTX", "").split(";")[-1].strip()
    if listed:
        return listed.replace(".", "")
    arch = os.environ.get("KERNELGYM_CUDA_ARCH")
    return arch or "90"


def library_path(request: BuildRequest, root: Path | None = None) -> Path:
    """Where the request's shared library lives in the cache (whether or not it is built yet)."""
    return (root or cache_root()) / "native" / request.key / "lib.so"


def compile_request(request: BuildRequest, root: Path | None = None, timeout_s: float = 300.0) -> Path:
    """Compile (or reuse) a shared library for the request; raises BuildError with the compiler log."""
    library = library_path(request, root)
    if library.exists():
        return library

    def compile_into(folder: Path) -> None:
        suffix = ".cu" if request.language == "cuda" else ".cpp"
        src = folder / f"kernel{suffix}"
        src.write_text(request.source, encoding="utf-8", errors="surrogatepass")
        command = _command(request, src, folder / "lib.so")
        try:
            proc = subprocess.run(niced(command), capture_output=True, text=True, timeout=timeout_s,
                                  cwd=folder, check=False)
        except FileNotFoundError:
            raise BuildError(f"compiler not found: {command[0]}", "") from None
        except subprocess.TimeoutExpired:
            raise BuildError(f"compiler ran past {timeout_s:.0f} s", "") from None
        if proc.returncode != 0:
            raise BuildError("compilation failed", (proc.stdout + proc.stderr).replace(str(src), src.name))

    build_folder(library.parent, compile_into)
    return library


def build_folder(out_dir: Path, fill: Callable[[Path], None]) -> None:
    """Runs `fill` in a fresh private folder next to `out_dir`, then moves it there in one rename, so no
    reader ever sees a half-built folder. An exception from `fill` leaves nothing behind."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir.parent, prefix=".build-") as tmp:
        os.chmod(tmp, 0o755)  # readable, not writable, by the unprivileged candidate that loads it
        fill(Path(tmp))
        try:
            os.rename(tmp, out_dir)
        except OSError:  # another process built the same key first: theirs is as good as ours
            pass
        # TemporaryDirectory's cleanup tolerates the folder having been moved away.


def _command(request: BuildRequest, src: Path, out: Path) -> list[str]:
    if request.language == "cuda":
        arch = cuda_arch()
        gencode = f"-gencode=arch=compute_{arch},code=sm_{arch}"
        return ["nvcc", *request.flags, gencode, str(src), "-o", str(out)]
    return [os.environ.get("CXX", "g++"), *request.flags, str(src), "-o", str(out)]


# Set inside an evaluation worker: forwards the build to kernelgym's trusted process and returns the path.
remote_builder: Callable[[BuildRequest], Path] | None = None
# Likewise for KernelBench-style load_inline extensions (see kernelgym.build.torch_ext).
remote_extension_builder = None
# Set inside a worker without a GPU: CUDA code is compiled (so errors reach the agent) but cannot run.
cuda_compile_only = False


def _build(request: BuildRequest) -> Path:
    return remote_builder(request) if remote_builder is not None else compile_request(request)


class KernelLibrary:
    """A loaded shared library whose `extern "C"` functions take tensors and Python scalars directly."""

    def __init__(self, path: Path | None, language: str, runnable: bool = True):
        self._path = path
        self._language = language
        self._lib = ctypes.CDLL(str(path)) if runnable and path is not None else None
        self._functions: dict[str, KernelFunction] = {}

    def __getattr__(self, name: str) -> KernelFunction:
        if name.startswith("_"):
            raise AttributeError(name)
        if name not in self._functions:
            if self._lib is None:
                self._functions[name] = KernelFunction(name, None, self._language)
            else:
                try:
                    symbol = getattr(self._lib, name)
                except AttributeError:
                    raise AttributeError(
                        f"the {self._language} library defines no function {name!r} (declare it extern \"C\")"
                    ) from None
                symbol.restype = None
                self._functions[name] = KernelFunction(name, symbol, self._language)
        return self._functions[name]


class KernelFunction:
    """One native function; counts its calls and time so the judge can see the solution used its kernel."""

    def __init__(self, name: str, symbol, language: str):
        self.name = name
        self._symbol = symbol
        self._language = language

    def __call__(self, *args) -> None:
        if self._symbol is None:
            raise RuntimeError(
                f"{self._language} kernel {self.name!r} compiled, but this machine has no GPU to run it"
            )
        converted = [_to_c(a, i, self.name) for i, a in enumerate(args)]
        with KERNEL_STATS.timed(self.name):
            self._symbol(*converted)


def _to_c(value, index: int, name: str):
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return ctypes.c_void_p(value.data_ptr())
    if isinstance(value, bool):
        return ctypes.c_int(int(value))
    if isinstance(value, int):
        return ctypes.c_int64(value)
    if isinstance(value, float):
        return ctypes.c_float(value)
    if value is None:
        return ctypes.c_void_p(0)
    raise TypeError(f"{name}: argument {index} has type {type(value).__name__}; pass tensors, ints or floats")


class KernelStats:
    """Calls into and time spent in the solution's own native kernels (read by the coverage check)."""

    def __init__(self) -> None:
        self.calls = 0
        self.time_ns = 0
        self.depth = 0  # > 0 while inside one of the solution's kernels (torch ops there are nested)

    def record(self, name: str, elapsed_ns: int) -> None:
        self.calls += 1
        self.time_ns += elapsed_ns

    @contextlib.contextmanager
    def timed(self, name: str):
        self.depth += 1
        start = clock_ns()
        try:
            yield
        finally:
            self.depth -= 1
            self.record(name, clock_ns() - start)

    def reset(self) -> None:
        self.calls = 0
        self.time_ns = 0


KERNEL_STATS = KernelStats()
# Operator namespaces that the solution's own libraries registered (TORCH_LIBRARY): their ops are its work.
OWN_OP_NAMESPACES: set[str] = set()


def load_cpp(source: str, extra_flags: Sequence[str] = ()) -> KernelLibrary:
    """Compile C++ (OpenMP allowed) with g++ and load it; see the module docstring for the convention."""
    path = _build(BuildRequest("cpp", source, (*CPP_FLAGS, *extra_flags)))
    return KernelLibrary(path, "cpp")


def load_cuda(source: str, extra_flags: Sequence[str] = ()) -> KernelLibrary:
    """Compile CUDA with nvcc alone (no torch headers) and load it.

    Write `extern "C"` host launchers over raw pointers that launch on the default stream, e.g.
    `extern "C" void launch_relu(const float* x, float* y, int64_t n)
    { relu<<<(n+255)/256, 256>>>(x, y, n); }`.
    """
    path = _build(BuildRequest("cuda", source, (*CUDA_FLAGS, *extra_flags)))
    return KernelLibrary(path, "cuda", runnable=not cuda_compile_only)
