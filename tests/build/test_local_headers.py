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
