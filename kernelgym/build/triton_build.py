"""Triton's native helper modules, built by kernelgym's trusted worker and cached by content.

Triton up to 3.6 compiles a small C module with the host compiler for every new kernel signature (its
launcher), into its cache. Each evaluation has a private, empty Triton cache (a shared one would be a
channel from one evaluation to the next), so each paid that compile again, about half a second per kernel.
The candidate's process hands the build to the worker through Triton's own hook (`triton.knobs.build.impl`);
the worker compiles it with Triton's own command, include and library folders, and keys the result by
everything that went into it, so one evaluation cannot plant a module that another one loads.

Compiled kernels are shared the same way. The candidate's process still turns its `@triton.jit` source into
Triton IR (TTIR: cheap, and the only step that needs its code), then hands the TTIR to the worker through
Triton's stage hook (`triton.knobs.runtime.add_stages_inspection_hook`); the worker compiles the rest
(TTGIR, LLVM IR, PTX, cubin) itself and keeps the result under a hash of the TTIR, the options, the GPU
architecture and the Triton and ptxas versions, all computed by the worker from what it compiles. An entry is
therefore always the trusted compile of exactly the IR it is keyed by: a candidate that sends other IR gets
its own entry, never someone else's, and it cannot write into the store (read-only to the candidate). A warm
evaluation of the same kernel skips the backend compile; each evaluation's own Triton cache stays private.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import sysconfig
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from kernelgym import kernels

MODULE_NAMES = ("__triton_launcher", "cuda_utils")  # the helpers Triton generates itself
# A kernel compile travels over the module-build channel under this name, its KernelRequest as the source.
KERNEL_REQUEST = "__kernelgym_triton_kernel"
# False: kernels compile in the candidate's process (private Triton cache only), as before. Off until the
# worker-side compile has run on a GPU (it is tested here only up to the cubin, without launching it).
TRUSTED_KERNEL_COMPILE = False
# Options that name files: the worker never takes them from the candidate (Triton's defaults apply).
_FILE_OPTIONS = ("extern_libs", "ir_override")


@dataclass(frozen=True)
class ModuleRequest:
    name: str
    source: str
    library_dirs: tuple[str, ...] = ()
    include_dirs: tuple[str, ...] = ()
    libraries: tuple[str, ...] = ()

    def to_meta(self) -> dict:
        return asdict(self)

    @classmethod
    def from_meta(cls, meta: dict) -> ModuleRequest:
        def strings(key: str) -> tuple[str, ...]:
            return tuple(str(v) for v in meta.get(key) or ())

        return cls(str(meta.get("name", "")), str(meta.get("source", "")), strings("library_dirs"),
                   strings("include_dirs"), strings("libraries"))

    @property
    def key(self) -> str:
        parts = [self.name, self.source, *self.library_dirs, "\0", *self.include_dirs, "\0", *self.libraries,
                 _compiler(), _triton_version(), sysconfig.get_config_var("EXT_SUFFIX") or ""]
        return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:32]


def refusal(request: ModuleRequest) -> str | None:
    """Why the worker will not build this request (None: it will): only Triton's own helpers, with a subset
    of Triton's own folders and libraries."""
    if request.name == KERNEL_REQUEST:  # off: no candidate may have the worker parse its kernel text
        return None if TRUSTED_KERNEL_COMPILE else "kernels compile in the candidate's own process"
    if request.name not in MODULE_NAMES:
        return f"not one of Triton's helper modules {MODULE_NAMES}: {request.name!r}"
    dirs, includes, libraries = _triton_build_inputs()
    if not (set(request.library_dirs) <= dirs and set(request.include_dirs) <= includes
            and set(request.libraries) <= libraries):
        return "folders or libraries other than Triton's own"
    return None


def module_path(request: ModuleRequest, root: Path | None = None) -> Path:
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    return (root or kernels.cache_root()) / "triton_modules" / request.key / f"{request.name}{suffix}"


def build(request: ModuleRequest, root: Path | None = None) -> Path:
    """In the worker: the built module (from the cache when it exists); BuildError when it cannot be built."""
    reason = refusal(request)
    if reason:
        raise kernels.BuildError(f"unsupported Triton module build: {reason}", "")
    if request.name == KERNEL_REQUEST:
        return compile_kernel(KernelRequest.from_json(request.source), root)
    target = module_path(request, root)
    if target.exists():
        return target
    from triton.runtime.build import _build

    def compile_into(folder: Path) -> None:  # Triton's own command writes <name><EXT_SUFFIX> into `folder`
        src = folder / f"{request.name}.c"
        src.write_text(request.source, encoding="utf-8", errors="surrogatepass")
        try:
            _build(request.name, str(src), str(folder), list(request.library_dirs),
                   list(request.include_dirs), list(request.libraries), [])
        except (subprocess.CalledProcessError, RuntimeError, OSError) as exc:
            raise kernels.BuildError(f"Triton module {request.name} failed to build: {exc}", "") from None

    kernels.build_folder(target.parent, compile_into)
    return target


def route_builds_to(ask: Callable[[ModuleRequest], Path]) -> bool:
    """In the candidate's process: Triton's helper builds go to `ask` (the worker). False without Triton."""
    try:
        from triton import knobs
    except Exception:  # noqa: BLE001 - a broken Triton install is no Triton here
        return False

    def impl(name, src, srcdir, library_dirs, include_dirs, libraries):
        # The worker writes its own copy of the source, so Triton's temporary folder is no include of ours.
        request = ModuleRequest(name, Path(src).read_text(), tuple(library_dirs),
                                tuple(d for d in include_dirs if d and d != srcdir), tuple(libraries))
        return str(ask(request))

    knobs.build.impl = impl
    if TRUSTED_KERNEL_COMPILE and hasattr(knobs.runtime, "add_stages_inspection_hook"):
        knobs.runtime.add_stages_inspection_hook = _compile_in_worker(
            lambda kernel: ask(ModuleRequest(KERNEL_REQUEST, kernel.to_json())))
    return True


@dataclass(frozen=True)
class KernelRequest:
    """One kernel's backend compile: its TTIR text, Triton's parsed options, the target GPU."""

    ttir: str
    options_json: str  # the backend options as sorted JSON, file-naming options left out
    capability: int
    warp_size: int = 32

    @classmethod
    def make(cls, ttir: str, options: dict, capability: int, warp_size: int = 32) -> KernelRequest:
        kept = {k: v for k, v in options.items() if k not in _FILE_OPTIONS}
        return cls(ttir, json.dumps(kept, sort_keys=True, default=str), int(capability), int(warp_size))

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> KernelRequest:
        try:
            data = json.loads(text)
            return cls(str(data["ttir"]), str(data["options_json"]), int(data["capability"]),
                       int(data.get("warp_size", 32)))
        except (ValueError, KeyError, TypeError) as exc:
            raise kernels.BuildError(f"malformed Triton kernel request: {exc}", "") from None

    @property
    def key(self) -> str:
        parts = [self.ttir, self.options_json, str(self.capability), str(self.warp_size), _triton_version(),
                 _ptxas_version(self.capability)]
        return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:32]


def kernel_dir(request: KernelRequest, root: Path | None = None) -> Path:
    return (root or kernels.cache_root()) / "triton_kernels" / request.key


def compile_kernel(request: KernelRequest, root: Path | None = None) -> Path:
    """In the worker: the folder with the kernel's stages (`kernel.<ext>`) and `stages.json`, compiled on
    first use; BuildError when Triton rejects the IR."""
    folder = kernel_dir(request, root)
    if (folder / "stages.json").exists():
        return folder

    def compile_into(tmp: Path) -> None:
        try:
            order, delta = _run_backend(request, tmp)
        except Exception as exc:  # noqa: BLE001 - the candidate's IR or options: its error, not the worker's
            raise kernels.BuildError(f"Triton failed to compile the kernel: {exc}", "") from None
        (tmp / "stages.json").write_text(json.dumps({"stages": order, "metadata": delta}, default=str))

    kernels.build_folder(folder, compile_into)
    return folder


def _run_backend(request: KernelRequest, tmp: Path) -> tuple[list[str], dict]:
    """Triton's own stages after TTIR, as `triton.compile` runs them; returns their order and what they added
    to the kernel's metadata."""
    from triton import knobs
    from triton._C.libtriton import ir
    from triton.backends.compiler import GPUTarget, Language
    from triton.compiler.compiler import make_backend

    target = GPUTarget("cuda", request.capability, request.warp_size)
    backend = make_backend(target)
    options = backend.parse_options(_tuples(json.loads(request.options_json)))
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    (tmp / "kernel.ttir").write_text(request.ttir, errors="surrogatepass")
    module = ir.parse_mlir_module(str(tmp / "kernel.ttir"), context)
    module.context = context
    stages: dict = {}
    hook, knobs.runtime.add_stages_inspection_hook = knobs.runtime.add_stages_inspection_hook, None
    try:
        backend.add_stages(stages, options, Language.TRITON)
    finally:
        knobs.runtime.add_stages_inspection_hook = hook
    order = list(stages)[list(stages).index("ttir") + 1:]
    metadata = {"target": target, **options.__dict__}
    before = dict(metadata)
    for ext in order:
        module = stages[ext](module, metadata)
        data = module if isinstance(module, bytes) else str(module).encode("utf-8", "surrogatepass")
        (tmp / f"kernel.{ext}").write_bytes(data)
    delta = {k: v for k, v in metadata.items() if k not in before or before[k] != v}
    return order, json.loads(json.dumps(delta, default=str))


def _compile_in_worker(ask: Callable[[KernelRequest], Path]):
    """Triton's stage hook for the candidate's process: the stages after TTIR read the worker's compile.
    When the worker cannot compile it (or this Triton calls the hook differently), Triton's own stages run."""

    def hook(*args):
        if not args:  # asked for a cache-key part: kernels compiled this way are keyed apart from others
            return "kernelgym-trusted-backend", "kernelgym-trusted-backend"
        if len(args) < 5 or not isinstance(args[1], dict):
            return
        backend, stages, options, _, capability = args[:5]
        if getattr(backend.target, "backend", "") != "cuda" or "ttir" not in stages or "ttgir" not in stages:
            return
        later = list(stages)[list(stages).index("ttgir"):]
        own = {ext: stages[ext] for ext in later}
        state: dict = {}

        def stage(ext, module, metadata):
            if ext == "ttgir":
                try:
                    request = KernelRequest.make(str(module), dict(options.__dict__), capability,
                                                 backend.target.warp_size)
                    folder = Path(ask(request))
                    metadata.update(json.loads((folder / "stages.json").read_text())["metadata"])
                    state["folder"] = folder
                except (kernels.BuildError, OSError, ValueError, KeyError):
                    state["folder"] = None  # Triton's own stages, in this process: its own errors, if any
            if state["folder"] is None:
                return own[ext](module, metadata)
            return _stage_output(state["folder"], ext)

        for ext in later:
            stages[ext] = lambda module, metadata, ext=ext: stage(ext, module, metadata)

    return hook


def _stage_output(folder: Path, ext: str):
    data = (folder / f"kernel.{ext}").read_bytes()
    return data if ext in ("cubin", "hsaco") else data.decode("utf-8", "surrogatepass")


def _tuples(value):
    """JSON lists back into the tuples Triton's options hold."""
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    if isinstance(value, dict):
        return {k: _tuples(v) for k, v in value.items()}
    return value


@functools.lru_cache(maxsize=8)
def _ptxas_version(capability: int) -> str:
    try:
        from triton.backends.nvidia.compiler import get_ptxas_version

        return str(get_ptxas_version(capability))
    except Exception:  # noqa: BLE001 - no ptxas: the key still holds the Triton version
        return "-"


def _triton_build_inputs() -> tuple[set[str], set[str], set[str]]:
    try:
        from triton.backends.nvidia import driver
    except Exception:  # noqa: BLE001 - a broken Triton install is no Triton here
        return set(), set(), set()
    try:
        library_dirs = set(driver.library_dirs())
    except Exception:  # noqa: BLE001 - no libcuda on this machine
        library_dirs = {driver.libdevice_dir}
    return library_dirs, set(driver.include_dirs), set(driver.libraries)


def _compiler() -> str:
    return os.environ.get("CC") or shutil.which("gcc") or shutil.which("clang") or "cc"


def _triton_version() -> str:
    try:
        import triton

        return triton.__version__
    except Exception:  # noqa: BLE001 - a broken Triton install is no Triton here
        return "-"
