"""KernelBench-style `load_inline` solutions, built by kernelgym's trusted worker and cached by content.

Inside an evaluation, `torch.utils.cpp_extension.load_inline` is replaced by `load_inline` below: the
sources go to the worker, which compiles them (never importing them) into `<cache>/torch_ext/<key>/`,
and the candidate's process imports the finished module. The same sources are never built twice, and the
candidate cannot write into the cache.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import inspect
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kernelgym import kernels
from kernelgym.build import flags, torch_ext_split
from kernelgym.build.torch_pch import precompiled_header_dir

# The split build (torch_ext_split) first, torch's own build for the rest (KERNELGYM_SPLIT_BUILD=0: torch's).
SPLIT_BUILD = os.environ.get("KERNELGYM_SPLIT_BUILD", "1") != "0"


@dataclass(frozen=True)
class ExtensionRequest:
    name: str
    cpp_sources: tuple[str, ...]
    cuda_sources: tuple[str, ...]
    functions: tuple[str, ...]
    extra_cflags: tuple[str, ...] = ()
    extra_cuda_cflags: tuple[str, ...] = ()
    extra_ldflags: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        import torch

        parts = [self.name, *self.cpp_sources, "\0cuda", *self.cuda_sources, "\0fn", *self.functions,
                 *self.extra_cflags, *self.extra_cuda_cflags, *self.extra_ldflags, torch.__version__,
                 os.environ.get("TORCH_CUDA_ARCH_LIST", ""), kernels.cpu_features()]  # -march=native
        return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:32]

    def to_meta(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in self.__dict__.items()}

    @classmethod
    def from_meta(cls, meta: dict) -> ExtensionRequest:
        def strings(key):
            return tuple(str(x) for x in meta.get(key, []))

        name = str(meta.get("name", "ext"))
        if not name.isidentifier():
            raise kernels.BuildError(f"extension name {name!r} is not a valid identifier", "")
        functions = strings("functions")
        if not all(f.isidentifier() for f in functions):
            raise kernels.BuildError("function names must be identifiers", "")
        cflags, ldflags = flags.words(strings("extra_cflags")), flags.words(strings("extra_ldflags"))
        cuda_cflags = flags.words(strings("extra_cuda_cflags"))
        # They reach command lines this worker runs (torch's build: through /bin/sh): checked, not trusted.
        refused = (flags.refused_for(cflags, "cpp") + flags.refused_for(cuda_cflags, "cuda")
                   + flags.refused_for(ldflags, "cpp"))
        if refused:
            raise kernels.BuildError(flags.why_refused(refused), "")
        return cls(name, strings("cpp_sources"), strings("cuda_sources"), functions, cflags, cuda_cflags,
                   ldflags)


def _bindings(functions: Sequence[str]) -> str:
    lines = [f'  m.def("{f}", &{f}, "{f}");' for f in functions]
    return "\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n" + "\n".join(lines) + "\n}\n"


def extension_dir(request: ExtensionRequest, root: Path | None = None) -> Path:
    """The cache folder that holds (or will hold) the request's `<name>.so`."""
    return (root or kernels.cache_root()) / "torch_ext" / request.key


def is_built(request: ExtensionRequest, root: Path | None = None) -> bool:
    return (extension_dir(request, root) / f"{request.name}.so").exists()


def build(request: ExtensionRequest, root: Path | None = None) -> Path:
    """Compile (or reuse) the extension; returns the folder holding `<name>.so`. Never imports it.

    The split build (`torch_ext_split`) runs first; whatever it does not take, torch's own build compiles."""
    out_dir = extension_dir(request, root)
    if is_built(request, root):
        return out_dir

    def fill(folder: Path) -> None:
        if not SPLIT_BUILD or torch_ext_split.build_into(request, folder, root) is None:
            _torch_build(request, folder, root)

    kernels.build_folder(out_dir, fill)
    return out_dir


def _torch_build(request: ExtensionRequest, tmp: Path, root: Path | None) -> None:
    """torch's own build of the request (one unit with the bindings, its ninja file) into `tmp`."""
    from torch.utils import cpp_extension

    sources = [tmp / "main.cpp"]
    sources[0].write_text("#include <torch/extension.h>\n" + "\n".join(request.cpp_sources)
                          + (_bindings(request.functions) if request.functions else ""))
    if request.cuda_sources:
        sources.append(tmp / "cuda.cu")
        sources[1].write_text(torch_ext_split.CUDA_PRELUDE + "\n".join(request.cuda_sources))
    options = {"name": request.name, "sources": [str(s) for s in sources],
               "extra_cflags": list(request.extra_cflags),
               "extra_cuda_cflags": list(request.extra_cuda_cflags),
               "extra_ldflags": list(request.extra_ldflags), "extra_include_paths": [],
               "build_directory": str(tmp), "verbose": False, "with_cuda": bool(request.cuda_sources)}
    pch = precompiled_header_dir(list(request.extra_cflags), root)
    if pch is not None:  # searched before torch's own include folder: gcc finds the header and its .gch there
        options["extra_include_paths"] = [str(pch)]
    accepted = inspect.signature(cpp_extension._write_ninja_file_and_build_library).parameters
    for optional in ("extra_sycl_cflags", "with_sycl"):
        if optional in accepted:
            options[optional] = None if optional == "with_sycl" else []
    try:
        cpp_extension._write_ninja_file_and_build_library(**options)
    except Exception as exc:  # noqa: BLE001 - the compiler's output is in the message
        raise kernels.BuildError("compilation failed", str(exc)) from None


_LOCAL_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*(?:"([^"\n]+)"|<([^>\n]+)>)[^\n]*$', re.MULTILINE)
_PRAGMA_ONCE = re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+once[^\n]*$", re.MULTILINE)
MAX_LOCAL_HEADER_BYTES = 4 << 20


def with_local_headers(text: str, folders: list[Path], seen: set[Path] | None = None,
                       include_paths: list[Path] | None = None) -> str:
    """The source with each `#include "x.h"` that names a file in `folders` (the source's own folder, the
    extension's extra_include_paths), and each `#include <x.h>` that names one on `include_paths` (the
    extension's extra_include_paths, as the compiler's -I), written in, once per file and translation unit
    (`seen`, shared by the sources compiled together): the worker builds from the sources' text, in a folder
    of its own, where such a header would not be found. Other includes stay as they are."""
    seen = set() if seen is None else seen
    include_paths = folders if include_paths is None else include_paths

    def expand(match: re.Match) -> str:
        quoted, angled = match.group(1), match.group(2)
        for folder in (folders if quoted else include_paths):
            path = Path(folder) / (quoted or angled)
            if not path.is_file():
                continue
            real = path.resolve()
            if real in seen:
                return ""
            seen.add(real)
            if sum(p.stat().st_size for p in seen) > MAX_LOCAL_HEADER_BYTES:
                return match.group(0)  # too large to carry: the build reports the header missing
            header = _PRAGMA_ONCE.sub("", real.read_text(errors="replace"))
            return with_local_headers(header, [real.parent, *folders], seen, include_paths)
        return match.group(0)

    return _LOCAL_INCLUDE.sub(expand, text)


def load_inline(name, cpp_sources, cuda_sources=None, functions=None, extra_cflags=None,
                extra_cuda_cflags=None, extra_ldflags=None, extra_include_paths=None, is_python_module=True,
                **_ignored):
    """Drop-in for `torch.utils.cpp_extension.load_inline` inside an evaluation (same main arguments).
    With is_python_module=False the library is loaded as torch loads it, for the operators it registers
    (TORCH_LIBRARY), and nothing is returned."""

    def listed(value) -> tuple[str, ...]:
        if value is None:
            return ()
        return (value,) if isinstance(value, str) else tuple(value)

    folders = [Path(p) for p in listed(extra_include_paths)]
    if folders:  # the C++ sources are one translation unit, the CUDA ones another: one header set each
        cpp_seen: set[Path] = set()
        cuda_seen: set[Path] = set()
        cpp_sources = [with_local_headers(s, folders, cpp_seen) for s in listed(cpp_sources)]
        cuda_sources = [with_local_headers(s, folders, cuda_seen) for s in listed(cuda_sources)] or None

    def flags(value) -> tuple[str, ...]:  # torch joins flags with spaces: an empty one (`[""]`) is no flag
        return tuple(f for f in listed(value) if str(f).strip())

    names = tuple(functions) if isinstance(functions, dict) else listed(functions)
    request = ExtensionRequest(name, listed(cpp_sources), listed(cuda_sources), names, flags(extra_cflags),
                               flags(extra_cuda_cflags), flags(extra_ldflags))
    folder = kernels.remote_extension_builder(request) if kernels.remote_extension_builder else build(request)
    if not is_python_module:
        _load_operators(folder / f"{name}.so")
        return None
    return _CountingModule(_import(name, folder / f"{name}.so"), names)


def _load_operators(path: Path) -> None:
    """Load a library that registers operators (TORCH_LIBRARY) and count each new operator's calls through
    torch.ops as the solution's own kernel calls. Its namespaces are the solution's: the in-process profile
    counts their ops as its own work, not PyTorch's."""
    import torch

    before = set(torch._C._dispatch_get_all_op_names())
    torch.ops.load_library(str(path))
    for full_name in sorted(set(torch._C._dispatch_get_all_op_names()) - before):
        namespace, _, op = full_name.partition("::")
        op = op.split(".")[0]
        kernels.OWN_OP_NAMESPACES.add(namespace)
        packet_holder = getattr(torch.ops, namespace)
        packet = getattr(packet_holder, op)
        if not isinstance(packet, _CountedOperator):
            setattr(packet_holder, op, _CountedOperator(packet, f"{namespace}::{op}"))


class _CountedOperator:
    """torch.ops.<namespace>.<op> of the solution's own library, its calls counted like an extension's
    functions; overloads (`.default`) and attributes are the operator's own."""

    def __init__(self, packet, name: str):
        self._packet, self._name = packet, name

    def __call__(self, *args, **kwargs):
        stats, clock = kernels.KERNEL_STATS, kernels.clock_ns
        stats.depth += 1
        start = clock()
        try:
            return self._packet(*args, **kwargs)
        finally:
            stats.depth -= 1
            stats.record(self._name, clock() - start)

    def __getattr__(self, name: str):
        return getattr(self._packet, name)


CUDA_SUFFIXES = (".cu", ".cuh")


def load(name, sources, extra_cflags=None, extra_cuda_cflags=None, extra_ldflags=None,
         extra_include_paths=None, is_python_module=True, **_ignored):
    """Drop-in for `torch.utils.cpp_extension.load` (an extension from source files the solution wrote): the
    files are read here, with the headers they include from their own folder or extra_include_paths, and
    built like `load_inline` sources by the trusted worker. Their own PYBIND11_MODULE binds the functions,
    as torch's `load` expects."""
    paths = [sources] if isinstance(sources, str | os.PathLike) else list(sources)
    include = [Path(p) for p in ([extra_include_paths] if isinstance(extra_include_paths, str)
                                 else extra_include_paths or [])]
    cpp, cuda = [], []
    cpp_seen: set[Path] = set()  # the files are built as one C++ and one CUDA translation unit
    cuda_seen: set[Path] = set()
    for path in paths:
        is_cuda = str(path).endswith(CUDA_SUFFIXES)
        text = with_local_headers(Path(path).read_text(), [Path(path).resolve().parent, *include],
                                  cuda_seen if is_cuda else cpp_seen, include)
        (cuda if is_cuda else cpp).append(text)
    return load_inline(name, cpp, cuda or None, None, extra_cflags, extra_cuda_cflags, extra_ldflags,
                       is_python_module=is_python_module)


def _import(name: str, path: Path):
    loader = importlib.machinery.ExtensionFileLoader(name, str(path))
    spec = importlib.util.spec_from_file_location(name, str(path), loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


class _CountingModule:
    """The extension module, with every function it exports counted as the solution's own kernel calls
    (those listed in `functions=` and those bound by the solution's own PYBIND11_MODULE alike)."""

    def __init__(self, module, functions: Sequence[str]):
        self._module = module

    def __getattr__(self, name: str):
        value = getattr(self._module, name)
        if name.startswith("__") or not callable(value) or isinstance(value, type):
            return value
        stats, clock = kernels.KERNEL_STATS, kernels.clock_ns

        # Inline rather than through KERNEL_STATS.timed: a launch-bound kernel's call is a few microseconds,
        # and the wrapper's own cost lands in the candidate's timed time.
        def call(*args, **kwargs):
            stats.depth += 1
            start = clock()
            try:
                return value(*args, **kwargs)
            finally:
                stats.depth -= 1
                stats.record(name, clock() - start)

        call.__name__ = call.__qualname__ = name
        call.__doc__ = getattr(value, "__doc__", None)
        self.__dict__[name] = call  # later lookups find it without __getattr__
        return call

    def __dir__(self):
        return dir(self._module)
