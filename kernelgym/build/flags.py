"""The compiler and linker flags a solution may add to its build.

Builds run in the trusted worker, outside the candidate's sandbox, and torch's own extension build writes the
flags into a ninja file whose commands run through /bin/sh. A flag is therefore part of a command line the
worker runs, and it is checked, never trusted: a red-team run had a flag run its own script as root in the
worker (a backquoted command in `extra_cflags`, or `-wrapper` among `extra_ldflags`) and slow the reference
down for a verified 1.4x.

A flag passes when it is one of the kinds honest solutions use: optimisation, language standard, defines,
warnings, target and code-generation switches, CUDA's device options, libraries to link. Everything else is
refused with its name, among it every way to have the toolchain run or load a program, plugin, script or
response file of the solution's choosing (`-wrapper`, `-fplugin`, `-B`, `-specs`, `@file`, `-ccbin`,
`-Wl,-plugin`, `--run`). No accepted flag holds a space, a quote or any other shell syntax.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_VALUE = r"[A-Za-z0-9_.+-]*"  # no '/', no ',': values that name nothing on disk
_PATH = r"[A-Za-z0-9_.+/-]+"

# Host compiler flags (g++, and what nvcc passes on to it).
HOST = [
    r"-O[0-3sgz]?", r"-Ofast",
    r"-std=(c|gnu)\+\+[0-9a-z]+",
    rf"-D{_NAME}(={_VALUE})?", rf"-U{_NAME}",
    rf"-f(?!plugin|use-ld)[A-Za-z0-9][A-Za-z0-9-]*(={_VALUE})?",  # -ffast-math, -fopenmp, -fPIC
    rf"-m[a-z0-9][a-z0-9.-]*(={_VALUE})?",  # -march=native, -mavx2, -mfma, -msse4.2
    r"-W[a-z0-9][a-z0-9=+-]*",  # warnings (-Wl, -Wa, -Wp, hold a comma: refused)
    r"-w", r"-g[a-z0-9-]*", r"-pthread", r"-pedantic", r"-v", r"-pipe", r"--param=[a-z0-9-]+=[0-9]+",
    rf"-I{_PATH}",
]
# nvcc's own options for device code.
_ARCH = r"(sm|compute|lto)_[0-9]+[af]?"
CUDA = [
    r"-O[0-3]", r"-std=(c|gnu)\+\+[0-9a-z]+", rf"-D{_NAME}(={_VALUE})?", rf"-U{_NAME}", r"-w", r"-g", r"-G",
    r"-v", rf"-I{_PATH}",
    r"--?use_fast_math", r"--?expt-relaxed-constexpr", r"--?expt-extended-lambda", r"--?lineinfo",
    r"--?restrict", r"--?extra-device-vectorization", r"--?res-usage", r"--resource-usage", r"-dlto",
    r"--?(fmad|ftz|prec-div|prec-sqrt)=(true|false)", r"--?maxrregcount=[0-9]+",
    rf"-arch={_ARCH}", rf"--gpu-architecture={_ARCH}", rf"-code={_ARCH}(,{_ARCH})*",
    rf"--gpu-code={_ARCH}(,{_ARCH})*", rf"(-gencode|--generate-code)=arch=compute_[0-9]+[af]?,code={_ARCH}",
    r"-rdc=(true|false)", r"--relocatable-device-code=(true|false)",
    r"--default-stream=(legacy|null|per-thread)", r"--?diag-suppress=[0-9,]+", r"--display-error-number",
    r"-Wno-deprecated-gpu-targets", r"-t[0-9]+", r"--threads=[0-9]+",
    r"(-Xptxas|--ptxas-options)=[A-Za-z0-9_.,=+-]+",
]
LINK = [
    r"-l[A-Za-z0-9_.+-]+", rf"-L{_PATH}", r"-pthread", r"-fopenmp", r"-shared", r"-s", r"-rdynamic",
    r"-static-libgcc", r"-static-libstdc\+\+",
    (rf"-Wl,(-O[0-3]|--as-needed|--no-as-needed|--no-undefined|-rpath,{_PATH}|-?-rpath={_PATH}"
     r"|-z,(now|relro|noexecstack|defs))"),
]


def _matcher(patterns: list[str]) -> Callable[[str], bool]:
    whole = re.compile("|".join(f"(?:{p})" for p in patterns))
    return lambda flag: bool(whole.fullmatch(flag))


_host, _cuda, _link = _matcher(HOST), _matcher(CUDA), _matcher(LINK)


def _host_list(value: str) -> bool:
    """-Xcompiler's argument: host flags separated by commas."""
    return all(_host(part) for part in value.split(","))


def _ptxas(value: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z0-9_.,=+-]+", value))


# Options whose argument is the next list item, each with the check of that argument.
_CUDA_PAIRS: dict[str, Callable[[str], bool]] = {
    "-Xptxas": _ptxas, "--ptxas-options": _ptxas,
    "-Xcompiler": _host_list, "--compiler-options": _host_list,
    "-arch": lambda v: bool(re.fullmatch(_ARCH, v)), "-code": lambda v: bool(re.fullmatch(_ARCH, v)),
    "-gencode": lambda v: bool(re.fullmatch(rf"arch=compute_[0-9]+[af]?,code={_ARCH}", v)),
    "-maxrregcount": str.isdigit, "--maxrregcount": str.isdigit,
}


def _cuda_single(flag: str) -> bool:
    if flag.startswith(("-Xcompiler=", "--compiler-options=")):
        return _host_list(flag.split("=", 1)[1])
    return _cuda(flag)


# Host options whose argument is the next item: an include folder, a tuning parameter.
_HOST_PAIRS: dict[str, Callable[[str], bool]] = {
    "-I": lambda v: bool(re.fullmatch(_PATH, v)),
    "--param": lambda v: bool(re.fullmatch(r"[a-z0-9-]+=[0-9]+", v)),
}

KINDS: dict[str, tuple[Callable[[str], bool], dict[str, Callable[[str], bool]]]] = {
    "cflags": (_host, _HOST_PAIRS),
    "cuda_cflags": (_cuda_single, _CUDA_PAIRS),
    "ldflags": (_link, {}),
}


# What each list of a build accepts. A C++ line mixes compile and link flags (lean builds pass one list, and
# solutions put -fopenmp or -lgomp in either of torch's); nvcc's takes its device options and link flags.
ACCEPTED = {"cpp": ("cflags", "ldflags"), "cuda": ("cuda_cflags", "ldflags")}


def words(flags: Iterable[str]) -> tuple[str, ...]:
    """The flags as the shell would have split them (`"-Xptxas -O3"` is two; torch's build passes a list item
    to /bin/sh as it is): each word is then checked, and the build gets the words, never a string to split."""
    return tuple(word for flag in flags for word in str(flag).split())


def refused_for(flags: Sequence[str], language: str) -> list[str]:
    """The flags (in order) a `language` ("cpp" or "cuda") command line does not accept."""
    return refused(flags, *ACCEPTED[language])


def refused(flags: Sequence[str], *kinds: str) -> list[str]:
    """The flags (in order) that none of the kinds accepts; empty when the build may use them all."""
    singles = [KINDS[k][0] for k in kinds]
    pairs = {name: check for k in kinds for name, check in KINDS[k][1].items()}
    out: list[str] = []
    items = list(flags)
    i = 0
    while i < len(items):
        flag = items[i]
        if flag in pairs:  # its argument is the next item
            argument = items[i + 1] if i + 1 < len(items) else None
            if argument is None or not pairs[flag](argument):
                out.append(f"{flag} {argument}" if argument is not None else flag)
            i += 2
            continue
        if flag and not any(accepts(flag) for accepts in singles):
            out.append(flag)
        i += 1
    return out


def why_refused(refused_flags: list[str]) -> str:
    return (f"build flags not allowed: {refused_flags} (builds run in the trusted worker: optimisation, "
            "-std, -D/-U defines, warnings, -march/-m and -f switches, CUDA's device options and -l/-L "
            "libraries are fine; nothing that names a program, plugin, script or response file, and no shell "
            "syntax)")
