"""The backend registry: how a solution is built and loaded, where it runs, and what counts as its own kernel.

Adding a DSL (TileLang, CuTe DSL, ...) is one new `Backend` entry: say which imports mark its kernels,
which decorators or calls create them, whether it needs a GPU to run, and the contract the prompt teaches.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelgym.backends.contracts import CPP_CONTRACT, CUDA_CONTRACT, TRITON_CONTRACT
from kernelgym.errors import BackendNotFoundError


@dataclass(frozen=True)
class Backend:
    name: str
    # Where candidate code runs: "cpu" always on the CPU; "cuda" on a GPU when there is one.
    device: str
    # Dotted call names that create the solution's own kernels (checked statically on the AST).
    kernel_builders: tuple[str, ...]
    # Decorators that mark a kernel function (Triton's @triton.jit).
    kernel_decorators: tuple[str, ...] = ()
    # Without a GPU: "run" (cpp), "interpret" (triton: TRITON_INTERPRET=1, correctness only), "compile"
    # (cuda).
    without_gpu: str = "run"
    contract: str = ""


_REGISTRY: dict[str, Backend] = {}


def register(backend: Backend) -> Backend:
    _REGISTRY[backend.name] = backend
    return backend


def get(name: str) -> Backend:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise BackendNotFoundError(f"unknown backend {name!r}; registered: {', '.join(names())}") from None


def names() -> list[str]:
    return sorted(_REGISTRY)


def solution_contract(name: str) -> str:
    """The text that teaches an LLM the solution form this backend expects."""
    return get(name).contract


register(Backend(
    name="cpp",
    device="cpu",
    kernel_builders=("load_cpp", "load_inline", "cpp_extension.load_inline", "cpp_extension.load",
                     "kernelgym.kernels.load_cpp"),
    without_gpu="run",
    contract=CPP_CONTRACT,
))
register(Backend(
    name="triton",
    device="cuda",
    kernel_builders=(),
    kernel_decorators=("triton.jit", "jit", "triton.autotune", "autotune"),
    without_gpu="interpret",
    contract=TRITON_CONTRACT,
))
register(Backend(
    name="cuda",
    device="cuda",
    kernel_builders=("load_cuda", "load_inline", "cpp_extension.load_inline", "cpp_extension.load",
                     "kernelgym.kernels.load_cuda"),
    without_gpu="compile",
    contract=CUDA_CONTRACT,
))

__all__ = ["Backend", "get", "names", "register", "solution_contract"]
