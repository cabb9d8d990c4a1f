"""CallProbe: calls of a library's functions counted from outside the calling process, by the file that
called (the building block for GPU launch evidence). Libraries of the test's own, built with gcc."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelgym.evaluation.call_probe import CallProbe

TARGET = ("#include <stdint.h>\n"
          "__attribute__((noinline)) void launch(int64_t k) { __asm__ volatile(\"\" ::: \"memory\"); }\n")
CALLER = ("#include <stdint.h>\nextern void launch(int64_t);\n"
          "void {name}(int64_t n) {{ for (int64_t i = 0; i < n; ++i) launch(i); }}\n")

CHILD = """
import ctypes, sys, threading
own = ctypes.CDLL(sys.argv[1]); other = ctypes.CDLL(sys.argv[2]); target = ctypes.CDLL(sys.argv[3])
own.own_calls(ctypes.c_int64(2))  # before the probe: not counted
print("ready", flush=True)
sys.stdin.readline()
own.own_calls(ctypes.c_int64(3)); other.other_calls(ctypes.c_int64(5)); target.launch(ctypes.c_int64(9))
worker = threading.Thread(target=other.other_calls, args=(ctypes.c_int64(4),))  # born while probing
worker.start(); worker.join()
print("done", flush=True)
sys.stdin.readline()
own.own_calls(ctypes.c_int64(4))  # after the probe: not counted
"""


@pytest.fixture(scope="module")
def libraries(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("call_probe")
    (folder / "target.c").write_text(TARGET)
    built = {"target": folder / "libtarget.so"}
    subprocess.run(["gcc", "-O2", "-fPIC", "-shared", str(folder / "target.c"), "-o", str(built["target"])],
                   check=True)
    for name in ("own", "other"):
        (folder / f"{name}.c").write_text(CALLER.format(name=f"{name}_calls"))
        built[name] = folder / f"lib{name}.so"
        subprocess.run(["gcc", "-O2", "-fPIC", "-shared", str(folder / f"{name}.c"), "-o", str(built[name]),
                        f"-L{folder}", "-ltarget", f"-Wl,-rpath,{folder}"], check=True)
    return built


def test_calls_are_counted_by_the_library_that_made_them(libraries):
    """The threads the target has at start are probed; one it starts meanwhile still starts (the events are
    never inherited: an inherited uprobe would make its clone fail) and its calls are not counted."""
    paths = [str(libraries[name]) for name in ("own", "other", "target")]
    child = subprocess.Popen([sys.executable, "-c", CHILD, *paths], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        probe = CallProbe(child.pid, str(libraries["target"]), ["launch"])
        assert probe.start(), probe.refused
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "done"
        counts = probe.stop()
    finally:
        child.stdin.write("end\n")
        child.stdin.flush()
        child.wait(timeout=30)
    assert counts.available and counts.lost == 0
    assert counts.calls_by_function == {"launch": 9}
    callers = {os.path.basename(path): n for path, n in counts.calls_by_caller.items()}
    assert callers.pop("libown.so") == 3 and callers.pop("libother.so") == 5
    # The call Python made through ctypes came from ctypes' own code, not from either library.
    assert sum(callers.values()) == 1 and not any("libtarget" in path for path in callers)


def test_a_function_the_library_lacks_is_a_clear_refusal(libraries):
    probe = CallProbe(os.getpid(), str(libraries["target"]), ["no_such_function"])
    assert not probe.start()
    assert "no_such_function" in probe.refused and "libtarget.so" in probe.refused
    assert not probe.stop().available
