"""Tunable parameters a solution exposes, found in its text, and the same solution with other values.

A solution is treated as a template: every integer it names as a tuning constant is a parameter with a
small set of values to try. Found in C++ (inside `load_cpp` strings): `constexpr int NAME = 64;`,
`#define NAME 64`, `#pragma GCC unroll 8` (all pragmas with the same count move together) and the OpenMP
`schedule(...)` clauses (all together). Found in Python (Triton launches): keyword arguments in CAPITALS or
`num_warps` / `num_stages` with an integer literal, and `NAME = 64` / `BM, BN = 64, 32` assignments to
CAPITAL names. A name assigned more than once with a literal (e.g. the vector width in both branches of
an `#ifdef`) is not a parameter: changing one copy would break the other.
"""

from __future__ import annotations

import ast
import hashlib
import io
import re
import tokenize
from collections import Counter
from dataclasses import dataclass, field

_CAPS = re.compile(r"^[A-Z][A-Z0-9_]*$")
_CONSTEXPR = re.compile(
    r"constexpr\s+(?:int|int32_t|int64_t|long|unsigned|size_t)\s+([A-Z][A-Z0-9_]*)\s*=\s*(\d+)\s*;"
)
_DEFINE = re.compile(r"#define\s+([A-Z][A-Z0-9_]*)\s+(\d+)\b")
_UNROLL = re.compile(r"#pragma\s+GCC\s+unroll\s+(\d+)")
_SCHEDULE = re.compile(r"schedule\(\s*((?:static|dynamic|guided)(?:\s*,\s*\d+)?)\s*\)")
SCHEDULES = ("static", "static, 16", "dynamic, 16", "dynamic, 256", "guided")
LAUNCH_OPTIONS = {"num_warps": ("1", "2", "4", "8", "16"), "num_stages": ("1", "2", "3", "4", "5")}
MAX_VALUE = 1 << 16


@dataclass
class Param:
    name: str  # "KC", "unroll 8", "omp schedule", "BLOCK", "num_warps#2"
    kind: str  # "constant", "unroll", "schedule", "launch"
    value: str  # the text there now
    choices: list[str]  # values to try, the current one included
    spans: list[tuple[int, int]] = field(default_factory=list)  # (start, end) of each place in the source


def int_choices(value: int, *, up: int = 4, floor: int = 1) -> list[str]:
    """Nearby values: powers of two from a quarter to `up` times a power of two, else the value scaled by
    1/2 .. 2; none below `floor`."""
    if value > 0 and value & (value - 1) == 0:
        options = {value >> 2, value >> 1, value, *(value << i for i in range(1, up.bit_length()))}
    else:
        options = {round(value * f) for f in (0.5, 0.75, 1.0, 1.5, 2.0)}
    return [str(v) for v in sorted(o for o in options if max(1, floor) <= o <= MAX_VALUE)]


def _cpp_params(source: str) -> list[Param]:
    params: list[Param] = []
    named = [(m, "constant") for m in _CONSTEXPR.finditer(source)] + [
        (m, "constant") for m in _DEFINE.finditer(source)
    ]
    counts = Counter(m.group(1) for m, _ in named)
    for m, kind in named:
        if counts[m.group(1)] == 1:
            params.append(Param(m.group(1), kind, m.group(2), int_choices(int(m.group(2))), [m.span(2)]))
    unrolls: dict[str, list[tuple[int, int]]] = {}
    for m in _UNROLL.finditer(source):
        unrolls.setdefault(m.group(1), []).append(m.span(1))
    for value, spans in unrolls.items():
        choices = sorted({"1", "2", "4", "8", "16", value}, key=int)
        params.append(Param(f"unroll {value}", "unroll", value, choices, spans))
    schedules = list(_SCHEDULE.finditer(source))
    if schedules:
        current = re.sub(r"\s*,\s*", ", ", schedules[0].group(1))
        choices = list(dict.fromkeys([current, *SCHEDULES]))
        params.append(Param("omp schedule", "schedule", current, choices, [m.span(1) for m in schedules]))
    return params


def _offsets(source: str) -> list[int]:
    starts, total = [0], 0
    for line in source.splitlines(keepends=True):
        total += len(line)
        starts.append(total)
    return starts


def _span(source_lines: list[str], starts: list[int], node: ast.AST) -> tuple[int, int]:
    def at(lineno: int, col: int) -> int:  # ast columns count UTF-8 bytes
        line = source_lines[lineno - 1]
        return starts[lineno - 1] + len(line.encode()[:col].decode(errors="ignore"))

    return at(node.lineno, node.col_offset), at(node.end_lineno, node.end_col_offset)


def _is_int(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int and node.value > 0


def _python_params(source: str) -> list[Param]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    lines, starts = source.splitlines(keepends=True), _offsets(source)
    found: list[tuple[str, str, ast.Constant]] = []  # (name, kind, literal)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg and (_CAPS.match(kw.arg) or kw.arg in LAUNCH_OPTIONS) and _is_int(kw.value):
                    found.append((kw.arg, "launch", kw.value))
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
            if isinstance(target, ast.Name) and _CAPS.match(target.id) and _is_int(value):
                found.append((target.id, "constant", value))
            elif (
                isinstance(target, ast.Tuple)
                and isinstance(value, ast.Tuple)
                and len(target.elts) == len(value.elts)
            ):
                for t, v in zip(target.elts, value.elts):
                    if isinstance(t, ast.Name) and _CAPS.match(t.id) and _is_int(v):
                        found.append((t.id, "constant", v))
    found.sort(key=lambda f: (f[2].lineno, f[2].col_offset))
    counts = Counter(name for name, kind, _ in found if kind == "constant")
    seen: Counter[str] = Counter()
    params = []
    for name, kind, literal in found:
        if kind == "constant" and counts[name] > 1:
            continue
        seen[name] += 1
        label = name if seen[name] == 1 else f"{name}#{seen[name]}"
        # Triton tiles: tl.dot wants 16 or more along each side, and a tile over twice the bundled one
        # rarely fits in registers and shared memory.
        floor = 16 if literal.value >= 16 else 1
        choices = (
            list(LAUNCH_OPTIONS[name])
            if name in LAUNCH_OPTIONS
            else int_choices(literal.value, up=2, floor=floor)
        )
        if str(literal.value) not in choices:
            choices = sorted({*choices, str(literal.value)}, key=int)
        params.append(Param(label, kind, str(literal.value), choices, [_span(lines, starts, literal)]))
    return params


def find_params(source: str) -> list[Param]:
    """The tunable parameters of a solution (C++ constants and pragmas, Triton launch constants)."""
    return _cpp_params(source) + _python_params(source)


def apply(source: str, params: list[Param], values: dict[str, str]) -> str:
    """`source` with the parameters named in `values` set to those values (the others left as they are)."""
    edits = []
    for p in params:
        if p.name in values and str(values[p.name]) != p.value:
            edits += [(start, end, str(values[p.name])) for start, end in p.spans]
    for start, end, text in sorted(edits, reverse=True):
        source = source[:start] + text + source[end:]
    return source


def current_values(params: list[Param]) -> dict[str, str]:
    return {p.name: p.value for p in params}


def normalise(source: str) -> str:
    """The source without comments (Python's, and C++ line comments inside its strings) and with whitespace
    collapsed: two solutions that differ only there are the same kernel (used to deduplicate a search)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return " ".join(source.split())
    kept = []
    for tok in tokens:
        if tok.type == tokenize.COMMENT:
            continue
        text = re.sub(r"//[^\n]*", "", tok.string) if tok.type == tokenize.STRING else tok.string
        kept.append(text)
    return " ".join(" ".join(kept).split())


def source_hash(source: str) -> str:
    return hashlib.sha256(normalise(source).encode()).hexdigest()[:16]
