"""Functions of the common types are bound by one prebuilt binder: the module behaves as pybind11's would."""

import json
import time

import pytest
import torch

from kernelgym.build import generic_binder, torch_ext, torch_ext_split
from kernelgym.build.torch_ext import ExtensionRequest

SOURCE = r"""
#include <torch/extension.h>
#include <vector>
torch::Tensor scale_shift(const torch::Tensor& x, double scale, float shift) { return x * scale + shift; }
torch::Tensor repeat_rows(torch::Tensor x, int64_t times, bool negate) {
    auto y = x.repeat({times, 1});
    return negate ? -y : y;
}
std::vector<torch::Tensor> halves(torch::Tensor x, int parts) {
    TORCH_CHECK(parts == 2, "halves: parts must be 2, got ", parts);
    return x.chunk(2);
}
void fill_(torch::Tensor& x, double value) { x.fill_(value); }
double total(torch::Tensor x) { return x.sum().item<double>(); }
torch::Tensor pick(std::vector<int64_t> sizes) { return torch::zeros(sizes); }
"""
FUNCTIONS = ("scale_shift", "repeat_rows", "halves", "fill_", "total", "pick")


def test_the_kinds_of_a_type_or_none_where_the_generic_binder_does_not_convert_it():
    assert generic_binder.kinds_of("at::Tensor (*)(at::Tensor const&, double, float)") == "T:Tdf"
    assert generic_binder.kinds_of("void (*)(at::Tensor&, long, int, bool)") == "v:Tlib"
    assert generic_binder.kinds_of(
        "std::vector<at::Tensor, std::allocator<at::Tensor> > (*)(at::Tensor)") == "V:T"
    assert generic_binder.kinds_of("at::Tensor (*)(std::vector<long, std::allocator<long> >)") is None
    assert generic_binder.kinds_of("at::Tensor (*)(std::optional<at::Tensor>)") is None
    assert generic_binder.kinds_of("long long (*)(at::Tensor)") is None


def _build(monkeypatch, generic: bool, tag: str):
    monkeypatch.setattr(torch_ext_split, "GENERIC_BINDER", generic)
    name = f"kg_generic_{tag}"
    request = ExtensionRequest(name, (f"{SOURCE}\n// {time.time_ns()}\n",), (), FUNCTIONS, ())
    folder = torch_ext.build(request)
    return torch_ext._import(name, folder / f"{name}.so"), json.loads((folder / "build.json").read_text())


def _calls(module) -> list:
    """Every call's result, or its exception's type and message: what a solution sees."""
    x = torch.arange(6.0).reshape(2, 3)
    calls = [
        lambda: module.scale_shift(x, 2, 0.5),  # an int where a double is declared converts, as in pybind11
        lambda: module.scale_shift(torch.nn.Parameter(x), 2.0, 1.0),
        lambda: module.repeat_rows(x, 2, True),
        lambda: module.repeat_rows(x, torch.tensor(2), False),  # __index__, as pybind11
        lambda: module.halves(x.flatten(), 2),
        lambda: module.total(x),
        lambda: module.repeat_rows(x, 2.5, True),  # no silent truncation
        lambda: module.scale_shift("x", 1.0, 1.0),
        lambda: module.scale_shift(x, 1.0),
        lambda: module.scale_shift(x, scale=1.0, shift=2.0),
        lambda: module.halves(x, 3),  # TORCH_CHECK: RuntimeError with its message
        lambda: module.pick([2, 3]),  # a type outside the generic set: its own binder
    ]
    found = []
    for call in calls:
        try:
            out = call()
            found.append([t.tolist() for t in out] if isinstance(out, list) else
                         out.tolist() if isinstance(out, torch.Tensor) else out)
        except Exception as exc:  # noqa: BLE001 (the exception is the behaviour compared)
            found.append((type(exc).__name__, "parts must be 2" in str(exc)))
    y = x.clone()
    found.append((module.fill_(y, 3.0), y.tolist()))  # void: None, and the tensor written in place
    return found


@pytest.mark.slow
def test_the_generic_binder_behaves_as_the_per_type_binders(monkeypatch):
    generic, _ = _build(monkeypatch, True, "on")
    per_type, _ = _build(monkeypatch, False, "off")
    assert _calls(generic) == _calls(per_type)
    results = _calls(generic)
    assert results[0] == [[0.5, 2.5, 4.5], [6.5, 8.5, 10.5]] and results[5] == 15.0
    assert results[6][0] == "TypeError" and results[7][0] == "TypeError" and results[9][0] == "TypeError"
    assert results[10] == ("RuntimeError", True)
    assert results[-1] == (None, [[3.0] * 3] * 2)
    # A second solution with new function types of the common kinds compiles no binder at all.
    monkeypatch.setattr(torch_ext_split, "GENERIC_BINDER", True)
    fresh = SOURCE.replace("pick(std::vector<int64_t> sizes)",
                           "unused(torch::Tensor a, double b, int c, bool d)")
    fresh = fresh.replace("return torch::zeros(sizes);", "return a;")
    names = tuple(f if f != "pick" else "unused" for f in FUNCTIONS)
    fresh = f"{fresh}\n// {time.time_ns()}\n"
    folder = torch_ext.build(ExtensionRequest("kg_generic_new", (fresh,), (), names, ()))
    record = json.loads((folder / "build.json").read_text())
    assert record["bindings_cached"] is True, record
