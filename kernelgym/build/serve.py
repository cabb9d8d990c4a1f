"""Builds asked for by a candidate's process, run here in the trusted worker and cached by content.

The candidate never runs a compiler: it sends what to build (lean C++/CUDA, a torch extension, Triton's own
launcher module), this module builds it with kernelgym's flags and answers with the artifact's path.
"""

from __future__ import annotations

import re

from kernelgym import kernels
from kernelgym.workers import messages as m

# Flags a lean build may add to kernelgym's own: optimisation switches and preprocessor defines.
EXTRA_FLAGS = {"-ffast-math", "-funroll-loops", "-O2", "-O3", "-mavx2", "-mfma", "-march=native", "-fopenmp",
               "--use_fast_math", "-lcublas", "-Xptxas", "-v", "-lineinfo", "-std=c++17"}
_DEFINE = re.compile(r"-D[A-Za-z_][A-Za-z0-9_]*(=[A-Za-z0-9_.+-]*)?")


def allowed_flag(flag: str, language: str) -> bool:
    base = set(kernels.CUDA_FLAGS if language == "cuda" else kernels.CPP_FLAGS)
    return flag in base or flag in EXTRA_FLAGS or bool(_DEFINE.fullmatch(flag))


def serve(request: dict, timeout_s: float) -> tuple[m.Message, bool]:
    """(Built | BuildFailed, whether it came from the cache)."""
    language = str(request.get("language"))
    try:
        if language == "torch_ext":
            return _extension(request)
        if language == "triton_module":
            from kernelgym.build import triton_build

            return m.Built(str(triton_build.build(triton_build.ModuleRequest.from_meta(request)))), True
        build = kernels.BuildRequest(language, str(request.get("source")),
                                     tuple(str(f) for f in request.get("flags", [])))
        refused = [f for f in build.flags if not allowed_flag(f, language)]
        if language not in ("cpp", "cuda") or refused:
            return m.BuildFailed(f"unsupported build request: flags {refused} are not allowed (kernelgym "
                                 "fixes the compiler line; -D defines and common optimisation flags are "
                                 "fine)"), True
        existed = kernels.library_path(build).exists()
        return m.Built(str(kernels.compile_request(build, timeout_s=timeout_s))), existed
    except kernels.BuildError as exc:
        return m.BuildFailed(str(exc), exc.log), False
    except (KeyError, TypeError, ValueError) as exc:
        return m.BuildFailed(f"malformed build request: {exc}"), True


def _extension(request: dict) -> tuple[m.Message, bool]:
    from kernelgym.build import torch_ext

    ext = torch_ext.ExtensionRequest.from_meta(request)
    existed = torch_ext.is_built(ext)
    return m.Built(str(torch_ext.build(ext))), existed
