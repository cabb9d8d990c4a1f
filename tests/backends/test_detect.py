"""Which backend a solution is written for, from the calls that build its kernels."""

from kernelgym.backends.detect import written_for, wrong_backend


def test_torch_extension_loaders_are_cpp_or_cuda_builds():
    assert written_for("from torch.utils.cpp_extension import load\nload('e', ['e.cu'])") == ["cpp", "cuda"]
    assert written_for("from kernelgym.kernels import load_cpp\nload_cpp('src')") == ["cpp"]


def test_a_reader_named_load_is_no_build():
    assert written_for("import json\njson.load(f)") == []
    assert wrong_backend("from json import load\nload(f)", "triton") is None


def test_a_cpp_build_sent_to_cuda_names_both_backends():
    message = wrong_backend("from kernelgym.kernels import load_cpp\nload_cpp('src')", "cuda")
    assert message and "load_cpp (the cpp backend)" in message and "cuda" in message


def test_an_empty_cuda_sources_keyword_is_no_cuda_build():
    """Models write `cuda_sources=None` (or `[]`) out on CPU builds: a cpp solution, not a CUDA one (a
    helper's honest ReLU was judged wrong_backend for it)."""
    for empty in ("None", "[]", "()", "''"):
        source = ("from torch.utils.cpp_extension import load_inline\n"
                  f"ext = load_inline('e', cpp_sources='', cuda_sources={empty}, functions=['f'])")
        assert wrong_backend(source, "cpp") is None, empty
    cuda = "from torch.utils.cpp_extension import load_inline\next = load_inline('e', '', cuda_sources='k')"
    assert wrong_backend(cuda, "cpp") is not None
