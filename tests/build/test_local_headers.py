"""A solution's own headers reach the build: the worker compiles the sources' text in a folder of its own, so
`#include "x.h"` of a header beside a `cpp_extension.load` source, or on `extra_include_paths`, is written
into the text where the candidate reads it (a helper's honest answers were `compile_error`, header not
found)."""

from __future__ import annotations

from kernelgym.build.torch_ext import with_local_headers
from kernelgym.evaluation.result import Verdict
from kernelgym.tasks import bundled


def test_local_headers_are_written_in_once_and_other_includes_stay(tmp_path):
    (tmp_path / "a.h").write_text('#pragma once\n#include "b.h"\nint a();\n')
    (tmp_path / "b.h").write_text("#pragma once\nint b();\n")
    source = ('#include <torch/extension.h>\n#include "a.h"\n#include "b.h"\n#include "cuda_fp16.h"\n'
              "int f();\n")
    text = with_local_headers(source, [tmp_path])
    assert text.count("int a();") == 1 and text.count("int b();") == 1
    assert text.index("int b();") < text.index("int a();")  # b.h where a.h includes it
    assert "#include <torch/extension.h>" in text and '#include "cuda_fp16.h"' in text
    assert "pragma once" not in text


HEADER_BESIDE_THE_SOURCE = r'''
import os
import tempfile

import torch.nn as nn
from torch.utils.cpp_extension import load

HEADER = """
#pragma once
#include <cstdint>
inline void relu_kernel(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
"""
SOURCE = """
#include <torch/extension.h>
#include "relu_kernel.h"
torch::Tensor relu_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    relu_kernel(xc.data_ptr<float>(), y.data_ptr<float>(), xc.numel());
    return y;
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("relu_forward", &relu_forward); }
"""
folder = tempfile.mkdtemp()
for name, text in (("relu_kernel.h", HEADER), ("relu.cpp", SOURCE)):
    with open(os.path.join(folder, name), "w") as f:
        f.write(text)
ext = load(name="relu_with_header", sources=[os.path.join(folder, "relu.cpp")], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_forward(x)
'''


def test_a_load_whose_source_includes_a_header_beside_it_is_judged(pool):
    result = pool.evaluate(bundled().get("L1/1_ReLU"), HEADER_BESIDE_THE_SOURCE, backend="cpp", size="cpu",
                           timing=False)
    assert result.verdict is Verdict.OK, (result.reasons, result.build.log[-1000:])


def test_a_header_shared_by_the_sources_of_one_build_is_written_in_once(tmp_path):
    """`load` with two .cpp files that both include one `#pragma once` header: the judge builds them as one
    translation unit, so the header must come in once in all (a helper's honest answer was compile_error,
    "redefinition of row_norm")."""
    (tmp_path / "norm.h").write_text("#pragma once\ninline float row_norm(const float* x) { return *x; }\n")
    for name in ("a.cpp", "b.cpp"):
        body = f"float {name[0]}(const float* x) {{ return row_norm(x); }}\n"
        (tmp_path / name).write_text('#include "norm.h"\n' + body)
    seen: set = set()
    texts = [with_local_headers((tmp_path / n).read_text(), [tmp_path], seen) for n in ("a.cpp", "b.cpp")]
    assert "".join(texts).count("inline float row_norm") == 1


def test_an_angle_include_is_found_on_extra_include_paths_only(tmp_path):
    """`#include <pool_common.h>` with the header's folder on extra_include_paths builds under torch (it is
    a -I); the judge writes it in. An angle include is never looked up beside the source."""
    include, beside = tmp_path / "include", tmp_path / "src"
    include.mkdir()
    beside.mkdir()
    (include / "pool_common.h").write_text("inline int pool() { return 1; }\n")
    (beside / "local.h").write_text("inline int local() { return 2; }\n")
    source = "#include <pool_common.h>\n#include <local.h>\n#include <vector>\n"
    text = with_local_headers(source, [beside, include], include_paths=[include])
    assert "inline int pool()" in text
    assert "#include <local.h>" in text and "#include <vector>" in text


TWO_FILES_ONE_HEADER = r'''
import os
import tempfile

import torch.nn as nn
from torch.utils.cpp_extension import load

HEADER = """
#pragma once
#include <cstdint>
inline float clamp0(float v) { return v > 0.f ? v : 0.f; }
"""
KERNEL = """
#include "clamp.h"
#include <cstdint>
void relu_kernel(const float* x, float* y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = clamp0(x[i]); }
"""
BINDING = """
#include <torch/extension.h>
#include "clamp.h"
void relu_kernel(const float* x, float* y, int64_t n);
torch::Tensor relu_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    relu_kernel(xc.data_ptr<float>(), y.data_ptr<float>(), xc.numel());
    return y;
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("relu_forward", &relu_forward); }
"""
folder = tempfile.mkdtemp()
for name, text in (("clamp.h", HEADER), ("kernel.cpp", KERNEL), ("binding.cpp", BINDING)):
    with open(os.path.join(folder, name), "w") as f:
        f.write(text)
ext = load(name="relu_two_files", sources=[os.path.join(folder, n) for n in ("kernel.cpp", "binding.cpp")])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_forward(x)
'''


def test_a_load_of_two_files_sharing_a_header_is_judged(pool):
    result = pool.evaluate(bundled().get("L1/1_ReLU"), TWO_FILES_ONE_HEADER, backend="cpp", size="cpu",
                           timing=False)
    assert result.verdict is Verdict.OK, (result.reasons, result.build.log[-1000:] if result.build else "")
