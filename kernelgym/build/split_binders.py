"""The Python bindings of a split build (build/torch_ext_split.py): the user unit's generated tail names each
bound function's type in a symbol and exports its address; each type is bound by the generic binder
(build/generic_binder.py) or by a pybind11 binder of its own, compiled once against torch's full header and
cached for every later solution; a small glue unit per solution says which binder binds which function."""

from __future__ import annotations

import re
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kernelgym import kernels
from kernelgym.build import generic_binder
from kernelgym.build.split_toolchain import Fallback, cxx, digest, run_tool, toolchain_id, torch_cflags

# The binders' own flags: fixed, so their precompiled header is shared; none, like torch's own build of them.
BINDINGS_FLAGS: tuple[str, ...] = ()


# The function types of most KernelBench-style answers, bound ahead of time by warm_up.
COMMON_SIGNATURES = tuple(
    f"at::Tensor (*)({args})" for args in (
        "at::Tensor", "at::Tensor, at::Tensor", "at::Tensor, at::Tensor, at::Tensor",
        "at::Tensor const&", "at::Tensor const&, at::Tensor const&",
        "at::Tensor const&, at::Tensor const&, at::Tensor const&", "at::Tensor, float", "at::Tensor, double",
        "at::Tensor, int", "at::Tensor, long",
    )
)


_SIGNATURE = re.compile(r"kernelgym_signature_(\d+)<(.*)>\(\)\s*$")


def user_tail(name: str, functions) -> str:
    """Appended to the user unit: each function's type as a symbol, its address, the names, the entry."""
    lines = ["", "// kernelgym: what the shared bindings unit needs from this solution",
             generic_binder.THUNK_TEMPLATE]
    for i, fn in enumerate(functions):
        lines += [
            generic_binder.thunk(i, fn),
            f"template <class T> void kernelgym_signature_{i}() {{}}",
            f"template void kernelgym_signature_{i}<decltype(&{fn})>();",
            f'extern "C" void* kernelgym_function_{i}() {{ return reinterpret_cast<void*>(&{fn}); }}',
        ]
    names = ", ".join(f'"{fn}"' for fn in functions)
    lines += [
        f'extern "C" const char* const kernelgym_function_names[] = {{{names}}};',
        'extern "C" void* PyInit_kernelgym_bindings();',
        (f'extern "C" __attribute__((visibility("default"))) void* PyInit_{name}() '
         "{ return PyInit_kernelgym_bindings(); }"),
        "",
    ]
    return "\n".join(lines)


def recorded_signatures(obj: Path, count: int) -> list[str]:
    """The function-pointer types the user unit recorded, as the demangler spells them."""
    try:
        out = subprocess.run(
            ["nm", "-C", "--defined-only", str(obj)], capture_output=True, text=True, timeout=60
        , check=False).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise Fallback(f"nm failed: {exc}") from None
    found: dict[int, str] = {}
    for line in out.splitlines():
        match = _SIGNATURE.search(line)
        if match:
            found[int(match.group(1))] = match.group(2)
    if sorted(found) != list(range(count)) or any(
        "anonymous namespace" in s or "lambda" in s for s in found.values()
    ):
        raise Fallback("function types that the bindings unit cannot name")
    return [found[i] for i in range(count)]


def binder_objects(signatures: list[str], root: Path | None, times, pch_future,
                   generic: bool = False) -> list[Path]:
    """The objects that bind these function types: the module's init (one for all), the generic binder when
    some function's type is one it takes, and one binder per other type, each from the cache or compiled into
    it (side by side). A binder is reused by every later solution with a function of its type, whatever the
    function's name or the other functions beside it. Its seconds and whether all came from the cache go to
    `times` (the build's torch_ext_split.SplitTimes)."""
    flags = [*torch_cflags("kernelgym_bindings"), *BINDINGS_FLAGS]
    wanted = {"init": _BINDINGS_INIT, **({"generic": generic_binder.SOURCE} if generic else {}),
              **{_binder_key(sig): _binder_source(sig) for sig in signatures}}
    base = (root or kernels.cache_root()) / "torch_ext_bindings"
    targets = {key: base / digest([key, source, *flags, toolchain_id()]) / "bind.o"
               for key, source in wanted.items()}
    missing = {key: wanted[key] for key, target in targets.items() if not target.exists()}
    times.bindings_cached = not missing
    if missing:
        started = time.monotonic()
        pch = pch_future.result()  # torch's full header, precompiled for the bindings' fixed flags
        include = [f"-I{pch}"] if pch is not None else []
        with ThreadPoolExecutor(len(missing)) as pool:
            for future in [pool.submit(_compile_binder, targets[key], source, include, flags)
                           for key, source in missing.items()]:
                future.result()
        times.bindings_s = round(time.monotonic() - started, 3)
    return list(targets.values())  # each once, however many functions share its type


def _compile_binder(target: Path, source: str, include: list[str], flags: list[str]) -> None:
    def compile_into(folder: Path) -> None:
        (folder / "bind.cpp").write_text(source)
        done = run_tool([cxx(), *include, *flags, "-c", "bind.cpp", "-o", "bind.o"], folder)
        if done.returncode != 0:  # a type the demangler spelled in a way C++ does not accept
            raise Fallback("the bindings unit did not compile: " + done.stderr[-500:])

    if not target.exists():
        kernels.build_folder(target.parent, compile_into)


def _binder_key(signature: str) -> str:
    return digest([signature])[:16]


def _binder_source(signature: str) -> str:
    return "\n".join([
        "#include <torch/extension.h>",
        f"using kernelgym_type = {signature};",
        (f'extern "C" void kernelgym_bind_{_binder_key(signature)}(void* module, const char* name, '
        "void* fn) {"),
        "  static_cast<pybind11::module_*>(module)->def(name, reinterpret_cast<kernelgym_type>(fn), name);",
        "}", ""])


_BINDINGS_INIT = """#include <torch/extension.h>
extern "C" void kernelgym_bind_all(void* module);
PYBIND11_MODULE(kernelgym_bindings, m) { kernelgym_bind_all(&m); }
"""


def glue_source(signatures: list[str], kinds: list[str | None]) -> str:
    """The one unit made for each solution: which binder binds which of its functions (no header; quick)."""
    lines = ['extern "C" {', "extern const char* const kernelgym_function_names[];",
             "void kernelgym_bind_generic(void*, const char*, void*, const char*);"]
    calls = []
    for i, (signature, kind) in enumerate(zip(signatures, kinds, strict=True)):
        if kind is not None:
            lines.append(f"void kernelgym_thunk_{i}(void**, void*);")
            calls.append(f"  kernelgym_bind_generic(module, kernelgym_function_names[{i}], "
                         f'reinterpret_cast<void*>(&kernelgym_thunk_{i}), "{kind}");')
            continue
        binder = f"kernelgym_bind_{_binder_key(signature)}"
        lines += [f"void {binder}(void*, const char*, void*);", f"void* kernelgym_function_{i}();"]
        calls.append(f"  {binder}(module, kernelgym_function_names[{i}], kernelgym_function_{i}());")
    return "\n".join([*lines, "void kernelgym_bind_all(void* module) {", *calls, "}", "}", ""])
