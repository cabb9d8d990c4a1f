"""torch's full `torch/extension.h`, precompiled once per set of flags into kernelgym's cache.

Used by torch's own build of a `load_inline` extension (build/torch_ext.py) and by the split build's binders
(build/torch_ext_split.py); a module of its own so that neither imports the other.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from kernelgym import kernels

MAX_PCH_FLAG_SETS = 4  # full-header precompiled headers kept (about 0.8 GB each); past it, builds go without


def precompiled_header_dir(extra_cflags: list[str], root: Path | None = None) -> Path | None:
    """A folder with a copy of `torch/extension.h` and its precompiled header for exactly these flags.

    gcc uses a `.gch` only when the flags match, and torch keeps one next to its own header, rebuilt whenever
    the flags change (about 30 s on 2 cores): solutions with different `extra_cflags` would rebuild it in
    turn. Here each flag set gets its own, built once (with torch's own command) and cached; a later build
    with the same flags takes about a third of the time. None when it cannot be built (the build is then
    only slower).
    """
    import torch

    key = hashlib.sha256("\0".join([torch.__version__, *extra_cflags]).encode()).hexdigest()[:16]
    folder = (root or kernels.cache_root()) / "torch_pch" / key
    if (folder / "torch" / "extension.h.gch").exists():
        return folder
    if len(list(folder.parent.glob("[0-9a-f]*"))) >= MAX_PCH_FLAG_SETS:  # each is most of a gigabyte
        return None
    command = _torch_pch_command(extra_cflags)
    if command is None:
        return None
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".build-"))
    try:
        header, pch = command["header"], command["pch"]
        (tmp / "torch").mkdir()
        shutil.copyfile(header, tmp / "torch" / "extension.h")
        ours = {header: str(tmp / "torch" / "extension.h"), pch: str(tmp / "torch" / "extension.h.gch")}
        argv = [ours.get(arg, arg) for arg in command["argv"]]
        done = subprocess.run(kernels.niced(argv), capture_output=True, timeout=900, check=False)
        if done.returncode != 0:
            return None
        os.chmod(tmp, 0o755)
        try:
            os.rename(tmp, folder)
        except OSError:  # built concurrently by another worker: theirs is as good
            pass
        return folder
    except (OSError, subprocess.SubprocessError):
        return None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class _Captured(Exception):
    pass


def _torch_pch_command(extra_cflags: list[str]) -> dict | None:
    """The command torch would run to precompile `torch/extension.h` for these flags (captured, not run)."""
    from torch.utils import cpp_extension

    builder = getattr(cpp_extension, "_check_and_build_extension_h_precompiler_headers", None)
    if builder is None:
        return None
    real = cpp_extension.subprocess
    captured: list[list[str]] = []

    class _Recorder:
        def __getattr__(self, name):
            return getattr(real, name)

        def check_output(self, argv, **kwargs):
            if "c++-header" not in list(argv):  # e.g. the compiler's version check: let it run
                return real.check_output(argv, **kwargs)
            captured.append(list(argv))
            raise _Captured

    cpp_extension.subprocess = _Recorder()
    try:
        # An include path no stored signature has, so torch always gets as far as its compile command.
        builder(list(extra_cflags), [f"/kernelgym-pch-probe-{os.getpid()}"])
    except _Captured:
        pass
    except Exception:  # noqa: BLE001 - no probe: build without the precompiled header
        return None
    finally:
        cpp_extension.subprocess = real
    if not captured:
        return None
    header = os.path.join(cpp_extension._TORCH_PATH, "include", "torch", "extension.h")
    argv = [arg for arg in captured[0] if not arg.startswith("-I/kernelgym-pch-probe-")]
    if header not in argv or header + ".gch" not in argv:
        return None
    return {"argv": argv, "header": header, "pch": header + ".gch"}
