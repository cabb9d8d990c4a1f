"""The split build of load_inline extensions: the same module as torch's build, or torch's build itself."""

import json
import subprocess
import time

import pytest

from kernelgym import kernels
from kernelgym.build import split_binders, split_toolchain, torch_ext, torch_ext_split
from kernelgym.build.torch_ext import ExtensionRequest

RELU = r"""
#include <torch/extension.h>
torch::Tensor relu_forward(torch::Tensor x) {
    auto y = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* out = y.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) out[i] = in[i] > 0.f ? in[i] : 0.f;
    return y;
}
"""


def request(source=RELU, functions=("relu_forward",), cflags=(), name="kg_split_relu"):
    return ExtensionRequest(name, (f"{source}\n// {time.time_ns()}\n",), (), functions, cflags)


def test_only_requests_it_can_build_exactly_like_torch_take_the_split_path():
    assert torch_ext_split.eligible(request()) is None
    assert (
        torch_ext_split.eligible(request(cflags=("-O3", "-fopenmp", "-march=native", "-Wall", "-DNDEBUG")))
        is None
    )
    assert "ABI" in torch_ext_split.eligible(request(cflags=("-D_GLIBCXX_DEBUG",)))
    assert "ABI" in torch_ext_split.eligible(request(cflags=("-Wp,-D_GLIBCXX_DEBUG",)))
    assert "bind themselves" in torch_ext_split.eligible(request(functions=()))
    assert "outside" in torch_ext_split.eligible(request(RELU + "namespace F = torch::nn::functional;"))
    assert "outside" in torch_ext_split.eligible(request(RELU + "PYBIND11_MODULE(x, m) {}"))


def test_the_user_unit_names_each_function_type_for_the_bindings(tmp_path):
    """The generated tail, compiled with the user's code, spells each type for the bindings unit."""
    source = (
        "#include <vector>\n#include <cstdint>\nnamespace at { struct Tensor {}; }\n"  # the thunks name it
        "double scale(const std::vector<int64_t>& xs, float f, bool b) { return f; }\n"
        "namespace { struct Hidden {}; }\nHidden hidden() { return {}; }\n"
    )
    (tmp_path / "u.cpp").write_text(source + split_binders.user_tail("ext", ("scale",)))
    subprocess.run(["g++", "-std=c++17", "-c", "u.cpp", "-o", "u.o"], cwd=tmp_path, check=True)
    (signature,) = split_binders.recorded_signatures(tmp_path / "u.o", 1)
    assert signature == "double (*)(std::vector<long, std::allocator<long> > const&, float, bool)"
    (tmp_path / "h.cpp").write_text(source + split_binders.user_tail("ext", ("hidden",)))
    subprocess.run(["g++", "-std=c++17", "-c", "h.cpp", "-o", "h.o"], cwd=tmp_path, check=True)
    with pytest.raises(split_toolchain.Fallback):  # a type only the user's unit can name: torch's build
        split_binders.recorded_signatures(tmp_path / "h.o", 1)


def test_gold_links_only_where_the_compiler_driver_has_it(tmp_path, monkeypatch):
    no_gold = tmp_path / "c++"
    no_gold.write_text("#!/bin/sh\necho 'GNU ld (GNU Binutils) 2.40'\n")  # -fuse-ld ignored: not gold
    no_gold.chmod(0o755)
    monkeypatch.setattr(split_toolchain, "_GOLD", {})
    monkeypatch.setenv("CXX", str(no_gold))
    assert split_toolchain.gold_link_flags() == []
    gold = tmp_path / "c++gold"
    gold.write_text("#!/bin/sh\necho 'GNU gold (GNU Binutils 2.40) 1.16'\n")
    gold.chmod(0o755)
    monkeypatch.setenv("CXX", str(gold))
    assert split_toolchain.gold_link_flags() == ["-fuse-ld=gold"]
    monkeypatch.setattr(split_toolchain, "GOLD_LINK", False)  # KERNELGYM_GOLD_LINK=0
    assert split_toolchain.gold_link_flags() == []


@pytest.mark.slow
def test_a_split_build_is_the_module_torch_would_build_and_shares_its_bindings(monkeypatch):
    import torch

    first = torch_ext.build(request())
    steps = (first / "build.json").read_text()
    assert json.loads(steps)["gold_link"] == bool(split_toolchain.gold_link_flags())
    module = torch_ext._import("kg_split_relu", first / "kg_split_relu.so")
    x = torch.randn(1000)
    assert torch.equal(module.relu_forward(x), torch.relu(x))
    assert module.__name__ == "kg_split_relu" and "relu_forward" in module.relu_forward.__doc__
    with pytest.raises(TypeError):  # pybind11's own argument checking, as with torch's build
        module.relu_forward("not a tensor")
    # Another name: one process keeps the first module of a name (torch's own builds behave the same).
    doubling = request(RELU.replace("0.f ? in[i]", "0.f ? 2 * in[i]"), cflags=("-O3",), name="kg_split_relu2")
    # A first link that fails (here a linker option nobody has) is linked again by the default linker.
    monkeypatch.setattr(torch_ext_split, "gold_link_flags", lambda: ["-Wl,--kernelgym-no-such-option"])
    second = torch_ext.build(doubling)
    second_steps = json.loads((second / "build.json").read_text())
    assert second_steps["bindings_cached"], steps  # same signature: reused
    assert not second_steps["gold_link"] and "default linker" in " ".join(second_steps["notes"])
    doubled = torch_ext._import("kg_split_relu2", second / "kg_split_relu2.so").relu_forward(x)
    assert torch.equal(doubled, 2 * torch.relu(x))


@pytest.mark.slow
def test_errors_in_the_users_code_are_reported_and_other_sources_go_to_torchs_build():
    with pytest.raises(kernels.BuildError) as error:
        torch_ext.build(request(RELU.replace("return y;", "return y")))
    assert "main.cpp" in error.value.log and "expected" in error.value.log
    # The light header lacks torch::special: the split build gives way and torch's build compiles it.
    needs_full = RELU.replace("return y;", "return torch::special::expit(y);")
    folder = torch_ext.build(request(needs_full))
    assert (folder / "kg_split_relu.so").exists()
    assert json.loads((folder / "build.json").read_text())["split"] is False  # and the record says why
