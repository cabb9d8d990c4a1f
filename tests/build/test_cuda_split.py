"""The split of a load_inline CUDA source into a device unit (nvcc, no torch) and a host unit (the host
compiler, torch's light header): what goes where, what is refused, and that the units meet at link time."""

import shutil
import subprocess

import pytest

from kernelgym.build import cuda_split

SOURCE = r"""#include <torch/extension.h>
#include <cuda_runtime.h>
#include <ATen/cuda/CUDAContext.h>

#define CHECK_INPUT(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")
constexpr int BLOCK = 256;
inline int blocks_for(int n) { return (n + BLOCK - 1) / BLOCK; }
struct Pair { float a, b; };

__device__ __forceinline__ float twice(float v) { return 2.f * v; }

// scales and shifts every element
__global__ void __launch_bounds__(BLOCK) scale_kernel(const float* __restrict__ x, float* __restrict__ y,
                                                      Pair p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = twice(x[i]) * p.a + p.b;
}

torch::Tensor scale(torch::Tensor x, double a, double b) {
    CHECK_INPUT(x);
    auto y = torch::empty_like(x);
    int n = x.numel();
    scale_kernel<<<blocks_for(n), BLOCK, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), Pair{(float)a, (float)b}, n);
    return y;
}
"""


def test_kernels_and_their_helpers_go_to_the_device_unit_and_torch_stays_in_the_host_unit():
    parts = cuda_split.split(SOURCE)
    assert parts.kernels == ["scale_kernel"]
    device = parts.device.removeprefix(cuda_split.DEVICE_PRELUDE)
    assert "torch" not in device and "ATen" not in device.replace("#define", "")
    assert "__global__ void __launch_bounds__(BLOCK) scale_kernel" in device
    assert "__device__ __forceinline__ float twice" in device
    assert "inline int blocks_for" in device and "struct Pair" in device and "constexpr int BLOCK" in device
    assert "torch::Tensor scale" not in device
    host = parts.host.removeprefix(cuda_split.HOST_PRELUDE)
    assert "#include <ATen/cuda/CUDAContext.h>" in host and "float twice" not in host
    assert "void scale_kernel(const float* __restrict__ x, float* __restrict__ y, Pair p, int n);" in host
    assert "__global__" not in host and "__launch_bounds__" not in host and "<<<" not in host
    assert ("::kernelgym_cuda::launch(scale_kernel, blocks_for(n), BLOCK, 0, "
            "at::cuda::getCurrentCUDAStream())(") in host


def test_a_using_directive_reaches_the_unit_that_needs_it():
    parts = cuda_split.split("using namespace std;\nusing namespace torch;\n" + SOURCE)
    assert "using namespace std;" in parts.device and "using namespace std;" in parts.host
    assert "using namespace torch;" not in parts.device and "using namespace torch;" in parts.host


def test_compiler_messages_point_at_the_sources_own_lines():
    parts = cuda_split.split(SOURCE)
    kernel_line = SOURCE.splitlines().index(next(ln for ln in SOURCE.splitlines() if "__global__" in ln)) + 1
    assert f'#line {kernel_line} "cuda.cu"\n__global__' in parts.device
    assert f'#line {kernel_line} "cuda.cu"\nvoid scale_kernel' in parts.host


@pytest.mark.parametrize(("source", "why"), [
    (("template <typename T> __global__ void k(T* x) {}\n"
     "void run(float* x) { k<float><<<1, 1>>>(x); }"), "templated kernel"),
    (("__constant__ float table[4];\n__global__ void k(float* x) { x[0] = table[0]; }\n"
     "void load(float* t) { cudaMemcpyToSymbol(table, t, 16); }"), "device variable 'table'"),
    ("namespace ops {\n__global__ void k(float* x) {}\n}", "namespace"),
    ("__global__ void k(at::Half* x) {}\nvoid run(at::Half* x) { k<<<1, 1>>>(x); }", "names torch"),
    ('const char* s = R"(raw)";\n__global__ void k() {}', "raw string"),
    ("void run(float* x) { x[0] = 1; }", "no kernel"),
])
def test_what_the_split_cannot_do_exactly_is_compiled_whole(source, why):
    with pytest.raises(cuda_split.NotSplittable, match=why):
        cuda_split.split(source)


def test_comments_strings_and_directives_do_not_confuse_the_scanner():
    source = ('#define BRACE "{"\n/* } __global__ void fake() { */\n'
              '__global__ void k(char* s) { const char* t = "}{;"; s[0] = t[0]; }  // }\n'
              "void run(char* s) { k<<<1, 1>>>(s); }\n")
    items = cuda_split.top_level_items(source)
    assert [item.kind for item in items] == ["directive", "function", "function"]
    assert cuda_split.split(source).kernels == ["k"]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc compiles the device unit")
def test_the_host_unit_calls_the_stub_that_the_device_unit_defines(tmp_path):
    """Compiled for real (nvcc, and g++ over torch's headers): the kernel the host unit launches is a symbol
    the device unit defines, so the two link into one extension."""
    from kernelgym.build import split_toolchain, torch_ext_split

    source = SOURCE.replace("#include <ATen/cuda/CUDAContext.h>\n", "").replace(
        ", 0, at::cuda::getCurrentCUDAStream()", "")  # the CPU build of torch ships no c10/cuda headers
    parts = cuda_split.split(source)
    (tmp_path / "device.cu").write_text(parts.device)
    (tmp_path / "host.cpp").write_text(parts.host)
    subprocess.run(["nvcc", "-gencode=arch=compute_90,code=sm_90", "--compiler-options", "-fPIC", "-c",
                    "device.cu", "-o", "device.o"], cwd=tmp_path, check=True)
    light = split_toolchain.plain_light_dir(tmp_path)
    subprocess.run(["g++", f"-I{light}", "-isystem", "/usr/local/cuda/include",
                    *split_toolchain.torch_cflags("kg_test"), "-c", "host.cpp", "-o", "host.o"],
                   cwd=tmp_path, check=True)
    torch_ext_split._check_kernel_symbols(tmp_path, parts.kernels)  # raises when the symbols differ
    wrong_type = parts.host.replace("void scale_kernel(const float*", "void scale_kernel(float*")
    (tmp_path / "host.cpp").write_text(wrong_type)
    subprocess.run(["g++", f"-I{light}", "-isystem", "/usr/local/cuda/include",
                    *split_toolchain.torch_cflags("kg_test"), "-c", "host.cpp", "-o", "host.o"],
                   cwd=tmp_path, check=True)
    with pytest.raises(split_toolchain.Fallback, match="does not define"):
        torch_ext_split._check_kernel_symbols(tmp_path, parts.kernels)



@pytest.mark.slow
def test_a_kernel_the_device_unit_defines_only_locally_does_not_count(tmp_path):
    """nvcc gives a template kernel's stub internal linkage: a unit that defines the kernel's symbol only as a
    local one cannot serve the host unit's launch (the library would fail to import), so it is refused."""
    from kernelgym.build import split_toolchain, torch_ext_split

    (tmp_path / "host.cpp").write_text("void k(float*);\nvoid run(float* x) { k(x); }\n")
    (tmp_path / "device.cpp").write_text("void k(float*) {}\n")
    for name in ("host", "device"):
        subprocess.run(["g++", "-c", f"{name}.cpp", "-o", f"{name}.o"], cwd=tmp_path, check=True)
    torch_ext_split._check_kernel_symbols(tmp_path, ["k"])
    # the same symbol, bound locally (what nvcc emits for a template kernel's specialization)
    subprocess.run(["objcopy", "--localize-symbol=_Z1kPf", "device.o"], cwd=tmp_path, check=True)
    with pytest.raises(split_toolchain.Fallback, match="does not define"):
        torch_ext_split._check_kernel_symbols(tmp_path, ["k"])
