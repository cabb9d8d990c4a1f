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
    from kernelgym.build import torch_ext_split

    source = SOURCE.replace("#include <ATen/cuda/CUDAContext.h>\n", "").replace(
        ", 0, at::cuda::getCurrentCUDAStream()", "")  # the CPU build of torch ships no c10/cuda headers
    parts = cuda_split.split(source)
    (tmp_path / "device.cu").write_text(parts.device)
    (tmp_path / "host.cpp").write_text(parts.host)
    subprocess.run(["nvcc", "-gencode=arch=compute_90,code=sm_90", "--compiler-options", "-fPIC", "-c",
                    "device.cu", "-o", "device.o"], cwd=tmp_path, check=True)
    light = torch_ext_split._plain_light_dir(tmp_path)
    subprocess.run(["g++", f"-I{light}", "-isystem", "/usr/local/cuda/include",
                    *torch_ext_split._torch_cflags("kg_test"), "-c", "host.cpp", "-o", "host.o"],
                   cwd=tmp_path, check=True)
    torch_ext_split._check_kernel_symbols(tmp_path, parts.kernels)  # raises when the symbols differ
    wrong_type = parts.host.replace("void scale_kernel(const float*", "void scale_kernel(float*")
    (tmp_path / "host.cpp").write_text(wrong_type)
    subprocess.run(["g++", f"-I{light}", "-isystem", "/usr/local/cuda/include",
                    *torch_ext_split._torch_cflags("kg_test"), "-c", "host.cpp", "-o", "host.o"],
                   cwd=tmp_path, check=True)
    with pytest.raises(torch_ext_split._Fallback, match="does not define"):
        torch_ext_split._check_kernel_symbols(tmp_path, parts.kernels)


TEMPLATED = r"""#include <torch/extension.h>
template <typename scalar_t, int BLOCK>
__global__ void __launch_bounds__(BLOCK) axpy_kernel(const scalar_t* __restrict__ x, scalar_t* y, float a,
                                                     int64_t n) {
    int64_t i = blockIdx.x * (int64_t)BLOCK + threadIdx.x;
    if (i < n) y[i] = static_cast<scalar_t>(a * static_cast<float>(x[i]) + static_cast<float>(y[i]));
}

torch::Tensor axpy(torch::Tensor x, torch::Tensor y, double a) {
    int64_t n = x.numel();
    AT_DISPATCH_FLOATING_TYPES_AND_HALF(x.scalar_type(), "axpy", [&] {
        axpy_kernel<scalar_t, 256><<<(n + 255) / 256, 256>>>(x.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(),
                                                             (float)a, n);
    });
    return y;
}
"""


def test_a_templated_kernel_is_declared_to_the_host_and_launched_as_a_specialization():
    parts = cuda_split.split(TEMPLATED)
    assert parts.kernels == ["axpy_kernel"] and parts.templated == ["axpy_kernel"]
    declared = "template <typename scalar_t, int BLOCK> void axpy_kernel(const scalar_t* __restrict__ x"
    assert declared in parts.host
    assert "::kernelgym_cuda::launch(axpy_kernel<scalar_t, 256>, (n + 255) / 256, 256)(" in parts.host
    headers, lines = cuda_split.instances(
        ["void axpy_kernel<float, 256>(float const*, float*, float, long)",
         "void axpy_kernel<c10::Half, 256>(c10::Half const*, c10::Half*, float, long)", "cudaLaunchKernel"],
        parts.templated)
    assert "&axpy_kernel<float, 256>" in lines and "&axpy_kernel<c10::Half, 256>" in lines
    assert "c10/util/Half.h" in headers
    symbol = "void axpy_kernel<float, 256>(float const*, float*, float, long)"
    assert cuda_split.kernel_name(symbol) == "axpy_kernel"
    with pytest.raises(cuda_split.NotSplittable, match="cannot name"):
        cuda_split.instances(["void axpy_kernel<(anonymous namespace)::T, 1>(int)"], parts.templated)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc compiles the device unit")
def test_the_device_unit_instantiates_what_the_host_unit_launches(tmp_path):
    """Compiled for real: the host unit first; its undefined symbols name the specializations (float,
    double and at::Half through AT_DISPATCH); the device unit instantiates exactly those."""
    from kernelgym.build import torch_ext_split

    parts = cuda_split.split(TEMPLATED)
    (tmp_path / "host.cpp").write_text(parts.host)
    light = torch_ext_split._plain_light_dir(tmp_path)
    flags = torch_ext_split._torch_cflags("kg_test")
    subprocess.run(["g++", f"-I{light}", "-isystem", "/usr/local/cuda/include", *flags, "-c", "host.cpp",
                    "-o", "host.o"], cwd=tmp_path, check=True)
    launched = list(torch_ext_split._symbols(tmp_path, "host.o", "--undefined-only").values())
    headers, lines = cuda_split.instances(launched, parts.templated)
    assert lines.count("&axpy_kernel<") == 3  # float, double, c10::Half
    (tmp_path / "device.cu").write_text(headers + parts.device + lines)
    includes = [f for f in flags if f != "-fPIC" and not f.startswith("-std")]
    subprocess.run(["nvcc", *includes, "-gencode=arch=compute_90,code=sm_90", "--compiler-options", "-fPIC",
                    "-std=c++20", "-c", "device.cu", "-o", "device.o"], cwd=tmp_path, check=True)
    torch_ext_split._check_kernel_symbols(tmp_path, parts.kernels)  # raises when a specialization is missing
