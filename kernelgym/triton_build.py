"""Triton's native helper modules, built by kernelgym's trusted worker and cached by content.

Triton up to 3.6 compiles a small C module with the host compiler for every new kernel signature (its
launcher), into its cache. Each evaluation has a private, empty Triton cache (a shared one would be a
channel from one evaluation to the next), so each paid that compile again, about half a second per kernel.
The candidate's process hands the build to the worker through Triton's own hook (`triton.knobs.build.impl`);
the worker compiles it with Triton's own command, include and library folders, and keys the result by
everything that went into it, so one evaluation cannot plant a module that another one loads.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sysconfig
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from kernelgym import kernels

MODULE_NAMES = ("__triton_launcher", "cuda_utils")  # the helpers Triton generates itself


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
    return True


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
