"""One prebuilt Python binding for the function types KernelBench-format solutions use most.

A pybind11 binder is a template instantiated per function type, and compiling one against torch's headers
takes 5-6 s on the H200's cores: every new type (`Tensor (Tensor, Tensor, double)`, ...) paid that before its
candidate could run, and real solutions' types rarely repeat. The generic binder is compiled once per machine.
It binds any function whose return and argument types are all in a small set (tensors, floating and
integer scalars, bool; a list of tensors back). The solution's own unit gets, for each function, a thunk: a
call through a template, written into the unit torch's build would compile anyway, that takes the arguments
as pointers to C++ objects. The binder converts the Python arguments by a one-letter kind per type, as
pybind11's casters would, calls the thunk and converts the result back. Types outside the set keep the
per-type binder.

Kinds: T tensor (by value or reference), d double, f float, l long (int64_t), i int, b bool, v void (return),
V std::vector of tensors (return).
"""

from __future__ import annotations

import re

# The demangler's spelling of each type the generic binder converts.
ARGUMENT_KINDS = {
    "at::Tensor": "T", "at::Tensor const&": "T", "at::Tensor&": "T", "double": "d", "float": "f",
    "long": "l", "int": "i", "bool": "b",
}
RETURN_KINDS = {
    "at::Tensor": "T", "void": "v", "std::vector<at::Tensor, std::allocator<at::Tensor> >": "V",
    "double": "d", "float": "f", "long": "l", "int": "i", "bool": "b",
}
_FUNCTION_POINTER = re.compile(r"^(?P<ret>.+?) \(\*\)\((?P<args>.*)\)$")


def kinds_of(signature: str) -> str | None:
    """`"R:ARGS"` for a function-pointer type the generic binder takes (e.g. `"T:Tdl"`), else None."""
    match = _FUNCTION_POINTER.match(signature.strip())
    if match is None:
        return None
    ret = RETURN_KINDS.get(match.group("ret"))
    args = match.group("args").strip()
    if ret is None or "<" in args or "(" in args:
        return None
    names = [] if args in ("", "void") else [a.strip() for a in args.split(",")]
    kinds = [ARGUMENT_KINDS.get(name) for name in names]
    if any(kind is None for kind in kinds):
        return None
    return f"{ret}:{''.join(kinds)}"  # type: ignore[arg-type]


# Appended to the solution's own unit: the thunk of each function. The template is instantiated for every
# function, so a type outside the set compiles to an empty body (that function keeps its per-type binder).
THUNK_TEMPLATE = r"""
#include <new>
#include <type_traits>
#include <utility>
#include <vector>
namespace kernelgym_generic {
template <class T> using bare = std::remove_cv_t<std::remove_reference_t<T>>;
template <class T> constexpr bool argument_ok =
    std::is_same_v<bare<T>, at::Tensor> || std::is_same_v<bare<T>, double> ||
    std::is_same_v<bare<T>, float> || std::is_same_v<bare<T>, long> || std::is_same_v<bare<T>, int> ||
    std::is_same_v<bare<T>, bool>;
template <class R> constexpr bool return_ok =
    std::is_void_v<R> || std::is_same_v<R, at::Tensor> || std::is_same_v<R, std::vector<at::Tensor>> ||
    std::is_same_v<R, double> || std::is_same_v<R, float> || std::is_same_v<R, long> ||
    std::is_same_v<R, int> || std::is_same_v<R, bool>;
template <class R, class... A, std::size_t... I>
void invoke(R (*f)(A...), void** args, void* result, std::index_sequence<I...>) {
  if constexpr (return_ok<R> && (argument_ok<A> && ...)) {
    if constexpr (std::is_void_v<R>) {
      f(std::forward<A>(*static_cast<bare<A>*>(args[I]))...);
    } else {
      new (result) R(f(std::forward<A>(*static_cast<bare<A>*>(args[I]))...));
    }
  }
}
template <class R, class... A> void call(R (*f)(A...), void** args, void* result) {
  invoke(f, args, result, std::index_sequence_for<A...>{});
}
}  // namespace kernelgym_generic
"""


def thunk(index: int, function: str) -> str:
    return (f'extern "C" void kernelgym_thunk_{index}(void** args, void* result) '
            f"{{ kernelgym_generic::call(&{function}, args, result); }}")


# The binder itself, compiled once with torch's full header (pybind11, THPVariable).
SOURCE = r"""#include <torch/extension.h>
#include <climits>
#include <new>
#include <string>
#include <vector>
namespace py = pybind11;
namespace {
struct Slot { alignas(16) unsigned char bytes[32]; };
using Thunk = void (*)(void**, void*);

[[noreturn]] void refuse(const std::string& name, std::size_t i, const char* wanted, PyObject* given) {
  throw py::type_error(name + "(): incompatible function arguments: argument " + std::to_string(i + 1) +
                       " must be " + wanted + ", not " + Py_TYPE(given)->tp_name);
}

void put(char kind, PyObject* obj, Slot& slot, const std::string& name, std::size_t i) {
  if (kind == 'T') {
    if (!THPVariable_Check(obj)) refuse(name, i, "a Tensor", obj);
    new (slot.bytes) at::Tensor(THPVariable_Unpack(obj));
  } else if (kind == 'd' || kind == 'f') {
    const double value = PyFloat_AsDouble(obj);
    if (value == -1.0 && PyErr_Occurred()) { PyErr_Clear(); refuse(name, i, "a float", obj); }
    if (kind == 'd') new (slot.bytes) double(value); else new (slot.bytes) float(static_cast<float>(value));
  } else if (kind == 'l' || kind == 'i') {
    if (PyFloat_Check(obj)) refuse(name, i, "an int", obj);  // as pybind11: no silent truncation
    PyObject* index = PyNumber_Index(obj);
    if (index == nullptr) { PyErr_Clear(); refuse(name, i, "an int", obj); }
    const long long value = PyLong_AsLongLong(index);
    Py_DECREF(index);
    if (value == -1 && PyErr_Occurred()) { PyErr_Clear(); refuse(name, i, "an int in range", obj); }
    if (kind == 'i' && (value < INT_MIN || value > INT_MAX)) refuse(name, i, "an int in range", obj);
    if (kind == 'l') new (slot.bytes) long(value); else new (slot.bytes) int(static_cast<int>(value));
  } else {  // 'b', as pybind11's caster: True, False, None, or a number's truth
    int value = 0;
    if (obj == Py_True) value = 1;
    else if (obj == Py_False || obj == Py_None) value = 0;
    else if (Py_TYPE(obj)->tp_as_number && Py_TYPE(obj)->tp_as_number->nb_bool) value = PyObject_IsTrue(obj);
    else refuse(name, i, "a bool", obj);
    if (value < 0) { PyErr_Clear(); refuse(name, i, "a bool", obj); }
    new (slot.bytes) bool(value != 0);
  }
}

void drop(char kind, Slot& slot) {
  if (kind == 'T') reinterpret_cast<at::Tensor*>(slot.bytes)->~Tensor();
}

py::object wrap(at::Tensor&& tensor) {
  return py::reinterpret_steal<py::object>(THPVariable_Wrap(std::move(tensor)));
}

py::object take(char kind, Slot& slot) {
  switch (kind) {
    case 'v': return py::none();
    case 'T': {
      auto* tensor = reinterpret_cast<at::Tensor*>(slot.bytes);
      py::object out = wrap(std::move(*tensor));
      tensor->~Tensor();
      return out;
    }
    case 'V': {
      auto* tensors = reinterpret_cast<std::vector<at::Tensor>*>(slot.bytes);
      py::list out;
      for (auto& tensor : *tensors) out.append(wrap(std::move(tensor)));
      using Tensors = std::vector<at::Tensor>;
      tensors->~Tensors();
      return out;
    }
    case 'd': return py::float_(*reinterpret_cast<double*>(slot.bytes));
    case 'f': return py::float_(*reinterpret_cast<float*>(slot.bytes));
    case 'l': return py::int_(*reinterpret_cast<long*>(slot.bytes));
    case 'i': return py::int_(*reinterpret_cast<int*>(slot.bytes));
    default: return py::bool_(*reinterpret_cast<bool*>(slot.bytes));
  }
}

py::object call(const std::string& name, Thunk thunk, char ret, const std::string& kinds, py::args given,
                py::kwargs named) {
  if (named.size() != 0) throw py::type_error(name + "(): incompatible function arguments: no keywords");
  if (given.size() != kinds.size())
    throw py::type_error(name + "(): incompatible function arguments: takes " + std::to_string(kinds.size()) +
                         " positional arguments, " + std::to_string(given.size()) + " given");
  std::vector<Slot> slots(kinds.size());
  std::vector<void*> pointers(kinds.size());
  std::size_t made = 0;
  Slot result;
  try {
    for (; made < kinds.size(); ++made) {
      put(kinds[made], given[made].ptr(), slots[made], name, made);
      pointers[made] = slots[made].bytes;
    }
    thunk(pointers.data(), result.bytes);
  } catch (...) {
    for (std::size_t i = 0; i < made; ++i) drop(kinds[i], slots[i]);
    throw;
  }
  for (std::size_t i = 0; i < kinds.size(); ++i) drop(kinds[i], slots[i]);
  return take(ret, result);
}
}  // namespace

extern "C" void kernelgym_bind_generic(void* module, const char* name, void* thunk, const char* kinds) {
  const std::string spec(kinds), fname(name);
  const char ret = spec[0];
  const std::string args = spec.substr(2);
  auto fn = reinterpret_cast<Thunk>(thunk);
  static_cast<py::module_*>(module)->def(
      name, [fname, fn, ret, args](py::args given, py::kwargs named) {
        return call(fname, fn, ret, args, std::move(given), std::move(named));
      }, name);
}
"""
