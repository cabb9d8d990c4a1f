"""Build flags a solution passes are checked before any build runs: the builds run in the trusted worker, and
torch's own extension build hands its flags to /bin/sh. Honest flags pass; flags that run or load anything
of the solution's choosing are refused by name, and the judge answers `compile_error` without building."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest

from kernelgym.build.flags import refused
from kernelgym.evaluation.result import Verdict
from kernelgym.tasks import bundled

ROOT = Path(__file__).parents[2]
SOLUTION = (ROOT / "benchmarks" / "kernelbench_style" / "relu_cpp_load_inline.py").read_text()
KINDS = {"extra_cflags": ("cflags", "ldflags"), "extra_cuda_cflags": ("cuda_cflags", "ldflags"),
         "extra_ldflags": ("ldflags", "cflags")}

# Flag lists seen in solutions nobody here wrote (KernelBench's examples, the CUDA-L1 corpus, typical model
# answers), and kernelgym's own lean flags.
HONEST = {
    "extra_cflags": [["-O3"], ["-O3", "-fopenmp"], ["-O3", "-std=c++17", "-march=native", "-ffast-math"],
                     ["-DNDEBUG", "-std=c++20"], ["-O2", "-funroll-loops", "-mavx2", "-mfma", "-Wall"],
                     ["-fPIC", "-w", "-g"], ["-msse4.2", "-pipe", "-ggdb", "--param", "max-unroll-times=8"],
                     ["-I", "/usr/local/include", "--param=max-unroll-times=4"]],
    "extra_cuda_cflags": [["-O3", "--use_fast_math"], ["-O3", "--use_fast_math", "-Xptxas", "-O3",
                                                        "--expt-relaxed-constexpr"],
                          ["-std=c++20", "-O3", "-DNDEBUG", "-arch=sm_90a", "--expt-extended-lambda",
                           "-diag-suppress=20012", "-Xcompiler", "-fPIC", "-U__CUDA_NO_HALF_OPERATORS__"],
                          ["--fmad=true", "--maxrregcount=64", "--ptxas-options=-v", "--restrict"],
                          ["-Xptxas=-O3", "-Xptxas=-v", "-lineinfo", "-gencode=arch=compute_90,code=sm_90"],
                          ["-gencode", "arch=compute_90a,code=sm_90a", "-Xcompiler=-fopenmp,-O3", "-O2"]],
    "extra_ldflags": [["-lcuda"], ["-lcudart", "-lcublas"], ["-L/usr/local/cuda/lib64", "-lcublas"],
                      ["-fopenmp"], ["-Wl,-rpath,/usr/local/cuda/lib64", "-lcublasLt"],
                      ["-Wl,-rpath=/x", "-Wl,--no-undefined", "-Wl,-z,now", "-static-libgcc", "-rdynamic",
                       "-s"]],
}

# Ways to have the toolchain (or the shell ninja runs it with) execute something of the solution's choosing.
HOSTILE = ["`touch /tmp/x`", "$(id)", "-O3 `id`", "-DX;id", "-DX=$(id)", "-I/tmp foo", "-wrapper",
           "-fplugin=/tmp/x.so", "-fplugin", "-B/tmp/", "-specs=/tmp/x", "@/tmp/args",
           "-Wl,-plugin,/tmp/x.so", "-ccbin=/tmp/cc", "--compiler-bindir=/tmp", "--run", "-Xlinker", "-o",
           "-fuse-ld=/tmp/ld", "-x", "-Xclang", "-Xcompiler=-wrapper,/bin/sh"]


def corpus_flag_lists() -> list[tuple[str, list[str]]]:
    """Every literal flag list of the load_inline calls in the CUDA-L1 corpus and KernelBench's examples,
    where this machine has them (read at test time, never copied here)."""
    sources = []
    spec = importlib.util.spec_from_file_location("cuda_l1_runner",
                                                  ROOT / "benchmarks" / "judge_trust" / "cuda_l1.py")
    runner = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = runner
    spec.loader.exec_module(runner)
    corpus = next((p for p in runner.CORPUS_PLACES if p.exists()), None)
    if corpus is not None:
        sources += [e.custom_code for e in runner.read_corpus(corpus)]
    kernelbench = ROOT / ".bench" / "KernelBench"
    if kernelbench.is_dir():
        sources += [p.read_text(errors="replace") for p in kernelbench.rglob("*.py")]
    found = []
    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg in KINDS:
                try:
                    value = ast.literal_eval(node.value)
                except ValueError:
                    continue
                found.append((node.arg, [value] if isinstance(value, str) else list(value)))
    return found


def test_honest_flags_pass():
    lists = [(kind, flags) for kind, seen in HONEST.items() for flags in seen] + corpus_flag_lists()
    rejected = {(kind, tuple(flags)): refused([f for f in flags if f], *KINDS[kind]) for kind, flags in lists}
    assert not any(rejected.values()), {k: v for k, v in rejected.items() if v}


@pytest.mark.parametrize("flag", HOSTILE)
def test_flags_that_run_or_load_something_are_refused_in_every_list(flag):
    for kind, kinds in KINDS.items():
        assert refused([flag], *kinds) == [flag], (kind, flag)


def test_a_flag_holding_several_words_is_split_as_the_shell_would_and_each_checked():
    from kernelgym.build.flags import words

    assert words(["-Xptxas -O3", "  -O3 ", "", "-gencode arch=compute_90,code=sm_90"]) == (
        "-Xptxas", "-O3", "-O3", "-gencode", "arch=compute_90,code=sm_90")
    assert refused(words(["-Xptxas -O3", "-gencode arch=compute_90,code=sm_90"]), "cuda_cflags") == []
    assert refused(words(["-O3 `id`"]), "cflags") == ["`id`"]


def test_an_option_is_refused_with_the_argument_it_takes():
    assert refused(["-Xcompiler", "-fplugin=/tmp/x.so"], "cuda_cflags") == ["-Xcompiler -fplugin=/tmp/x.so"]
    assert refused(["-Xptxas"], "cuda_cflags") == ["-Xptxas"]
    assert refused(["-Xcompiler", "-fPIC", "-O3"], "cuda_cflags") == []


@pytest.mark.parametrize("where, flags", [
    ("extra_cflags", ["-O3", "`touch {marker}`"]),
    ("extra_ldflags", ["-wrapper", "/bin/sh,-c,touch {marker}"]),
])
def test_the_judge_builds_nothing_with_a_hostile_flag(pool, tmp_path, where, flags):
    marker = tmp_path / "ran"
    listed = repr([f.format(marker=marker) for f in flags])
    cheat = SOLUTION.replace('extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"]',
                             f'{where}={listed}')
    assert cheat != SOLUTION
    result = pool.evaluate(bundled().get("L1/1_ReLU"), cheat, backend="cpp")
    assert result.verdict is Verdict.COMPILE_ERROR, result.reasons
    assert "build flags not allowed" in " ".join(result.reasons) + result.build.log, result.reasons
    assert not marker.exists()
