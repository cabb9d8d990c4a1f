"""A KernelBench-style CUDA source split into a device unit and a host unit, so that nvcc never parses torch.

A `load_inline` CUDA source mixes kernels with host wrappers written against torch (`torch::Tensor`,
`TORCH_CHECK`, `data_ptr<float>()`). nvcc's front ends then read all of torch's headers, which is most of a
cold build. Here the source is cut at its top-level items:

- device unit (nvcc): kernels, `__device__` functions and variables, and the plain declarations they need
  (macros, constants, structs); no torch header. nvcc also emits each kernel's host stub here.
- host unit (the host compiler, with the light precompiled header): the wrappers, with each kernel declared
  as the plain function its stub is, and every `kernel<<<grid, block, shmem, stream>>>(args)` written as a
  call of `kernelgym_cuda::launch(kernel, grid, block, shmem, stream)(args)`, which converts the arguments
  to the kernel's parameter types like a call does and hands them to `cudaLaunchKernel`.

`#line` markers keep the compiler's messages on the source's own line numbers. Whatever the split cannot
do exactly (templated kernels, whose stubs nvcc keeps local to their unit; namespaces; device code that
names torch; host code that names a device variable) returns a reason instead, and the whole source is
compiled by nvcc as before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Headers that belong to torch (and so to the host unit only).
_TORCH_INCLUDE = re.compile(r'#\s*include\s*[<"](torch|ATen|c10|pybind11|THC|caffe2)/')
# Names that mean the device unit would need torch.
_TORCH_NAME = re.compile(r"\b(torch|at|c10|caffe2)::|\b(AT|TORCH|C10)_[A-Z_]+\b")
_SPECIFIER = re.compile(r"\b(__global__|__device__|__host__|__constant__|__shared__|__managed__)\b")
_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\(")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")

HOST_PRELUDE = """#include <torch/extension.h>
// torch's nvcc flags (COMMON_NVCC_FLAGS), for the half types as nvcc's host pass would see them
#define __CUDA_NO_HALF_OPERATORS__
#define __CUDA_NO_HALF_CONVERSIONS__
#define __CUDA_NO_BFLOAT16_CONVERSIONS__
#define __CUDA_NO_HALF2_OPERATORS__
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cstddef>
#include <tuple>
#include <utility>
#undef __host__
#define __host__
#undef __device__
#define __device__
namespace kernelgym_cuda {
// What `kernel<<<grid, block, shmem, stream>>>(args)` does: the arguments become the kernel's parameter types
// (as in a call), and the launch goes through cudaLaunchKernel, which records its error for cudaGetLastError.
template <class... P>
struct Launch {
  void (*kernel)(P...);
  dim3 grid, block;
  size_t shmem;
  cudaStream_t stream;
  template <class... A>
  void operator()(A&&... args) const {
    std::tuple<P...> values(std::forward<A>(args)...);
    send(values, std::index_sequence_for<P...>{});
  }
  template <std::size_t... I>
  void send(std::tuple<P...>& values, std::index_sequence<I...>) const {
    void* pointers[sizeof...(P) + 1] = {static_cast<void*>(&std::get<I>(values))...};
    cudaLaunchKernel(reinterpret_cast<const void*>(kernel), grid, block, pointers, shmem, stream);
  }
};
template <class... P>
Launch<P...> launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t shmem = 0, cudaStream_t stream = 0) {
  return Launch<P...>{kernel, grid, block, shmem, stream};
}
}  // namespace kernelgym_cuda
"""
# What torch's own CUDA unit gets from <torch/extension.h> that kernels commonly lean on, minus torch.
DEVICE_PRELUDE = """#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cstdint>
#include <cstdio>
#include <cmath>
#include <cfloat>
#include <climits>
#include <algorithm>
"""


@dataclass
class Item:
    """One top-level piece of the source: a preprocessor line, a declaration, or a function definition."""

    text: str
    line: int  # 1-based line of its first character in the source
    kind: str  # "directive", "function" or "declaration"
    specifiers: frozenset[str] = frozenset()
    head: str = ""  # a function's text before its body


@dataclass
class Split:
    device: str
    host: str
    kernels: list[str] = field(default_factory=list)


class NotSplittable(Exception):
    pass


def split(source: str, filename: str = "cuda.cu") -> Split:
    """The device and host units of `source`; raises NotSplittable with the reason."""
    items = top_level_items(source)
    device_names = _device_variables(items)
    device, host, kernels = [DEVICE_PRELUDE], [HOST_PRELUDE], []
    device_code = []  # what nvcc compiles beyond the directives: it must not need torch
    for item in items:
        mark = f'#line {item.line} "{filename}"\n'
        if item.kind == "directive":
            if not _TORCH_INCLUDE.match(item.text):
                device.append(mark + item.text)
            host.append(mark + item.text)
            continue
        specifiers = item.specifiers
        if "__global__" in specifiers:
            if _without_comments_and_strings(item.text).lstrip().startswith("template"):
                # nvcc gives a template kernel's host stub internal linkage (a local symbol, even when
                # instantiated explicitly): another unit cannot launch it (measured on the H200: the
                # library's import failed on the undefined specialization).
                raise NotSplittable("a templated kernel (nvcc keeps its specializations' stubs local)")
            name = _function_name(item.head if item.kind == "function" else item.text)
            kernels.append(name)
            device.append(mark + item.text)
            device_code.append(item.text)
            host.append(mark + _kernel_declaration(item) + "\n")
        elif specifiers & {"__device__", "__constant__", "__shared__", "__managed__"} and (
            "__host__" not in specifiers
        ):
            device.append(mark + item.text)
            device_code.append(item.text)
        elif item.kind == "function" and "__host__" not in specifiers and not _shared_helper(item):
            host.append(mark + _launches_rewritten(item.text))
            for name in device_names:
                if re.search(rf"\b{re.escape(name)}\b", item.text):
                    raise NotSplittable(f"host code uses the device variable {name!r}")
        elif _TORCH_NAME.search(item.text) or re.match(r"\s*using\s+namespace\s+(torch|at|c10)\b", item.text):
            host.append(mark + item.text)
        else:  # constants, structs, typedefs, __host__ __device__ helpers: both units
            device.append(mark + item.text)
            device_code.append(item.text)
            host.append(mark + item.text)
    if not kernels:
        raise NotSplittable("no kernel")
    device_text = "\n".join(device) + "\n"
    if _TORCH_NAME.search(_without_comments_and_strings("\n".join(device_code))):
        raise NotSplittable("the device code names torch")
    return Split(device_text, "\n".join(host) + "\n", kernels)


def top_level_items(source: str) -> list[Item]:
    """The source's top-level items, in order. Raises NotSplittable for what this scanner does not follow."""
    return _Scanner(source).scan()


class _Scanner:
    """One pass over the source: whitespace, comments, literals and preprocessor lines are stepped over (a
    top-level directive is an item), brackets are counted, and an item ends at a top-level `;` or at the
    closing brace of a function's body."""

    def __init__(self, source: str):
        self.source, self.i, self.line = source, 0, 1
        self.items: list[Item] = []
        self.start: int | None = None  # where the item under way began
        self.start_line, self.depth, self.head_end, self.at_line_start = 1, 0, 0, True

    def scan(self) -> list[Item]:
        while self.i < len(self.source):
            if not self._stepped_over():
                self._code(self.source[self.i])
        if self.start is not None and self.source[self.start:].strip():
            raise NotSplittable("the source ends inside a declaration")
        return self.items

    def _advance(self, end: int) -> None:
        self.line += self.source.count("\n", self.i, end)
        self.i = end

    def _stepped_over(self) -> bool:
        source, i, c = self.source, self.i, self.source[self.i]
        if c == "\n":
            self.at_line_start = True
            self._advance(i + 1)
        elif c in " \t\r\f\v":
            self.i += 1
        elif c == "#" and self.at_line_start:
            self._directive()
        elif source.startswith("//", i):
            end = source.find("\n", i)
            self._advance(len(source) if end < 0 else end)
        elif source.startswith("/*", i):
            end = source.find("*/", i + 2)
            self._advance(len(source) if end < 0 else end + 2)
        else:
            self.at_line_start = False
            return False
        return True

    def _directive(self) -> None:
        end = _directive_end(self.source, self.i)
        text = self.source[self.i:end]
        if self.depth == 0 and self.start is None:
            if re.match(r"#\s*pragma\s+once\b", text) is None:
                self.items.append(Item(text, self.line, "directive"))
        elif re.match(r"#\s*(if|ifdef|ifndef|else|elif|endif)\b", text):
            raise NotSplittable("a conditional directive inside a declaration")
        self._advance(end)

    def _code(self, c: str) -> None:
        if self.start is None:
            self.start, self.start_line, self.head_end = self.i, self.line, self.i
        if c in "\"'":
            if c == '"' and self.i > 0 and self.source[self.i - 1] == "R":
                raise NotSplittable("a raw string literal")
            self._advance(_literal_end(self.source, self.i))
            return
        if c in "([{":
            if c == "{" and self.depth == 0:
                self.head_end = self.i
                head = _without_comments_and_strings(self.source[self.start:self.i])
                if re.match(r"\s*(namespace|extern\s*\"C(\+\+)?\"\s*$)", head):
                    raise NotSplittable("a namespace or extern block")
            self.depth += 1
        elif c in ")]}":
            self.depth -= 1
            if self.depth < 0:
                raise NotSplittable("unbalanced brackets")
            head = self.source[self.start:self.head_end]
            if c == "}" and self.depth == 0 and _is_function_head(head):
                self._end_item("function", head)
        elif c == ";" and self.depth == 0:
            self._end_item("declaration")
        self.i += 1

    def _end_item(self, kind: str, head: str = "") -> None:
        self.items.append(_item(self.source[self.start:self.i + 1], self.start_line, kind, head))
        self.start = None


def _shared_helper(item: Item) -> bool:
    """A plain inline or constexpr helper that names no torch and launches nothing: kernels may call it
    (nvcc's --expt-relaxed-constexpr), and a copy in each unit cannot clash at link time."""
    bare = _without_comments_and_strings(item.head)
    return (re.search(r"\b(inline|constexpr|static)\b", bare) is not None and "<<<" not in item.text
            and _TORCH_NAME.search(_without_comments_and_strings(item.text)) is None)


def _item(text: str, line: int, kind: str, head: str = "") -> Item:
    words = frozenset(_SPECIFIER.findall(_without_comments_and_strings(head or text)))
    return Item(text, line, kind, words, head)


def _is_function_head(head: str) -> bool:
    bare = _without_comments_and_strings(head).strip()
    if "(" not in bare or "=" in bare.split("(")[0]:
        return False
    return re.match(r"(template\s*<.*?>\s*)?(struct|class|union|enum)\b", bare, re.DOTALL) is None


def _directive_end(source: str, i: int) -> int:
    while True:
        end = source.find("\n", i)
        if end < 0:
            return len(source)
        if source[end - 1] != "\\":
            return end
        i = end + 1


def _literal_end(source: str, i: int) -> int:
    quote, j = source[i], i + 1
    while j < len(source):
        if source[j] == "\\":
            j += 2
            continue
        if source[j] == quote:
            return j + 1
        if source[j] == "\n":
            raise NotSplittable("an unterminated literal")
        j += 1
    raise NotSplittable("an unterminated literal")


def _without_comments_and_strings(text: str) -> str:
    text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", text, flags=re.DOTALL)
    return re.sub(r'"(\\.|[^"\\\n])*"|\'(\\.|[^\'\\\n])*\'', '""', text)


def _device_variables(items: list[Item]) -> list[str]:
    names = []
    for item in items:
        if item.kind == "declaration" and item.specifiers & {"__device__", "__constant__", "__managed__"}:
            bare = _without_comments_and_strings(item.text).split("=")[0].split("[")[0]
            found = _IDENTIFIER.findall(bare)
            if found and "(" not in bare:
                names.append(found[-1])
    return names


def _function_name(head: str) -> str:
    bare = _drop_call(_without_comments_and_strings(head), _LAUNCH_BOUNDS)
    before = bare[: bare.index("(")] if "(" in bare else bare
    names = re.findall(r"[A-Za-z_][\w:]*", before)
    if not names:
        raise NotSplittable("a kernel without a name")
    return names[-1]


def _kernel_declaration(item: Item) -> str:
    """The kernel as the host unit sees it: a plain function, its host stub's signature."""
    head = item.head if item.kind == "function" else item.text.rstrip().rstrip(";")
    head = _without_comments_and_strings(head)
    head = _drop_call(head, _LAUNCH_BOUNDS)
    head = re.sub(r"\b(__global__|__noinline__|__forceinline__|static|inline)\b", " ", head)
    return " ".join(head.split()) + ";"


def _drop_call(text: str, pattern: re.Pattern) -> str:
    match = pattern.search(text)
    while match:
        end = _matching(text, match.end() - 1)
        text = text[: match.start()] + text[end + 1:]
        match = pattern.search(text)
    return text


def _matching(text: str, open_at: int) -> int:
    pairs = {"(": ")", "[": "]", "{": "}", "<": ">"}
    close, depth = pairs[text[open_at]], 0
    for j in range(open_at, len(text)):
        if text[j] == text[open_at]:
            depth += 1
        elif text[j] == close:
            depth -= 1
            if depth == 0:
                return j
    raise NotSplittable("unbalanced brackets")


def _launches_rewritten(text: str) -> str:
    """`name<<<config>>>` -> `::kernelgym_cuda::launch(name, config)`, everywhere in a host function."""
    out, i = [], 0
    while True:
        at = text.find("<<<", i)
        if at < 0:
            out.append(text[i:])
            return "".join(out)
        end = text.find(">>>", at)
        if end < 0:
            raise NotSplittable("a launch without its closing >>>")
        callee = re.search(r"([A-Za-z_][\w:]*)\s*$", text[i:at])
        if callee is None:
            raise NotSplittable("a launch of something other than a named kernel (a template?)")
        name_start = i + callee.start(1)
        config = text[at + 3:end]
        out.append(text[i:name_start])
        out.append(f"::kernelgym_cuda::launch({callee.group(1)}, {config})")
        i = end + 3
