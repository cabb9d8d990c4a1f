"""Static stage: an AST check of the solution source, per backend (not a regex on the text).

Each rule that fires adds one line to `reasons`, starting with the rule's name, so the agent can act on it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from kernelgym.backends import Backend
from kernelgym.evaluation.result import StaticResult

MAX_SOURCE_BYTES = 1_000_000

# Modules a kernel has no business importing: concurrency that outlives forward, process control, the
# harness's internals, introspection that can hunt for the expected answer.
FORBIDDEN_IMPORTS = {
    "threading": "threads can finish work after forward returns",
    "_thread": "threads can finish work after forward returns",
    "multiprocessing": "processes can finish work after forward returns",
    "concurrent": "executors can finish work after forward returns",
    "subprocess": "solutions may not start processes",
    "asyncio": "solutions may not schedule background work",
    "signal": "solutions may not handle signals",
    "gc": "gc can be used to hunt for the reference's outputs",
    "inspect": "frame inspection can hunt for the reference's outputs",
    "ctypes": "raw memory access is reserved to kernelgym's loaders",
    "socket": "solutions may not use the network",
    "pickle": "solutions may not deserialize data",
    "kernelgym.workers": "the harness's internals are off limits",
    "kernelgym.evaluation": "the harness's internals are off limits",
    "builtins": "rebinding the interpreter's builtins is not allowed",
    "importlib": "dynamic imports are not allowed",
    "types": "building functions and modules at run time is not allowed",
    "io": "solutions may not read or write files",
    "pathlib": "solutions may not read or write files",
    "shutil": "solutions may not read or write files",
    "tempfile": "solutions may not read or write files",
    "mmap": "raw memory maps are not allowed",
    "numpy": "another library's kernels are not the solution's own",
    "scipy": "another library's kernels are not the solution's own",
    "numba": "another library's kernels are not the solution's own",
    "cupy": "another library's kernels are not the solution's own",
    "jax": "another library's kernels are not the solution's own",
    "tensorflow": "another library's kernels are not the solution's own",
    "torch.multiprocessing": "processes can finish work after forward returns",
    "operator": "attrgetter and methodcaller are getattr in disguise",
    "weakref": "reaching objects through weak references is not allowed",
    "copyreg": "rewriting how objects are rebuilt is not allowed",
}

# Builtins that, once bound to another name or called with computed arguments, hide what a solution does.
DANGEROUS_BUILTINS = {"getattr", "setattr", "delattr", "__import__", "vars", "globals", "locals", "eval", "exec",
                      "compile", "open", "type", "object", "super_", "breakpoint", "memoryview"}
# What a solution may use of `os` (e.g. setting TORCH_CUDA_ARCH_LIST before a build).
OS_ALLOWED = {"os.environ", "os.path"}

# Attributes whose reassignment changes what the judge sees (timers, comparisons, synchronization).
PROTECTED_ATTRIBUTES = {
    "allclose", "isclose", "equal", "assert_close", "testing", "perf_counter", "perf_counter_ns", "time",
    "monotonic", "monotonic_ns", "process_time", "Event", "elapsed_time", "record", "synchronize",
    "forward", "Model", "manual_seed", "get_inputs", "__eq__", "__ne__", "__torch_function__",
    "__torch_dispatch__", "__class__", "KERNEL_STATS", "remote_builder",
}

FORBIDDEN_CALLS = {
    "sys._getframe": "frame inspection can hunt for the reference's outputs",
    "os._exit": "exiting the process is not a result",
    "os.fork": "solutions may not start processes",
    "os.kill": "solutions may not signal processes",
    "os.system": "solutions may not start processes",
    "os.popen": "solutions may not start processes",
    "sys.exit": "exiting the process is not a result",
    "exit": "exiting the process is not a result",
    "quit": "exiting the process is not a result",
    "torch.cuda.Stream": "work on another stream escapes the judge's timing",
    "torch.cuda.stream": "work on another stream escapes the judge's timing",
    "torch.cuda.set_stream": "work on another stream escapes the judge's timing",
    "torch.cuda.ExternalStream": "work on another stream escapes the judge's timing",
    "torch.Stream": "work on another stream escapes the judge's timing",
    "torch.set_default_dtype": "changing the default precision is a precision downgrade",
    "torch.set_float32_matmul_precision": "TF32 matmuls are a precision downgrade",
    "torch.backends.cuda.matmul.allow_tf32": "TF32 matmuls are a precision downgrade",
    "setattr": "dynamic attribute patching is not allowed",
    "delattr": "dynamic attribute patching is not allowed",
    "globals": "reaching into module globals is not allowed",
    "open": "solutions may not read or write files",
    "locals": "reaching into namespaces is not allowed",
    "vars": "reaching into namespaces is not allowed",
    "eval": "dynamic code is not allowed",
    "exec": "dynamic code is not allowed",
    "compile": "dynamic code is not allowed",
    "__import__": "dynamic imports are not allowed",
    "importlib.import_module": "dynamic imports are not allowed",
    "torch.compile": "torch.compile generates the kernels for you",
}

# Flags that lower precision when assigned True.
PRECISION_FLAGS = {"allow_tf32", "allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"}

LOW_PRECISION_DTYPES = {"torch.float16", "torch.half", "torch.bfloat16", "torch.float8_e4m3fn", "torch.float8_e5m2"}

TORCH_TENSOR_BASES = {"Tensor", "torch.Tensor", "torch._C._TensorBase", "_TensorBase", "TensorBase"}


@dataclass
class _Finding:
    rule: str
    line: int
    message: str

    def render(self) -> str:
        return f"{self.rule}: {self.message} (line {self.line})"


def static_check(source: str, backend: Backend, task_dtype: str = "float32") -> StaticResult:
    """Rules that need no execution. `passed` is False when any rule fires; `reasons` says which."""
    if len(source.encode("utf-8", "replace")) > MAX_SOURCE_BYTES:
        return StaticResult(False, [f"source_too_large: the solution is over {MAX_SOURCE_BYTES // 1000} kB"])
    if not source.strip():
        return StaticResult(False, ["empty_source: the solution is empty"])
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return StaticResult(False, [f"syntax_error: {exc.msg} (line {exc.lineno})"])
    except ValueError as exc:  # e.g. null bytes
        return StaticResult(False, [f"syntax_error: {exc}"])
    checker = _Checker(backend, low_precision_forbidden=task_dtype in ("float32", "float64"))
    checker.visit(tree)
    findings = checker.findings + _structure(tree, backend, checker)
    reasons = list(dict.fromkeys(f.render() for f in findings))
    return StaticResult(passed=not reasons, reasons=reasons)


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    if isinstance(node, ast.Call):
        return _dotted(node.func) + "()"
    return ""


class _Checker(ast.NodeVisitor):
    def __init__(self, backend: Backend, low_precision_forbidden: bool):
        self.backend = backend
        self.low_precision_forbidden = low_precision_forbidden
        self.findings: list[_Finding] = []
        self.aliases: dict[str, str] = {}  # local name -> module/object it imports
        self.called_names: set[int] = set()  # Name nodes in call position (visited before their children)

    def add(self, rule: str, node: ast.AST, message: str) -> None:
        self.findings.append(_Finding(rule, getattr(node, "lineno", 0), message))

    # imports -----------------------------------------------------------------------------------------
    def _check_module(self, name: str, node: ast.AST) -> None:
        for forbidden, why in FORBIDDEN_IMPORTS.items():
            if name == forbidden or name.startswith(forbidden + "."):
                self.add("forbidden_import", node, f"import of {name}: {why}")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._check_module(alias.name, node)
            self.aliases[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        self._check_module(module, node)
        for alias in node.names:
            self._check_module(f"{module}.{alias.name}", node)
            self.aliases[alias.asname or alias.name] = f"{module}.{alias.name}"
            if alias.name == "Model" or (alias.name == "*" and module not in ("torch", "torch.nn")):
                self.add("reference_import", node, f"importing {alias.name} from {module}: the reference is off limits")
        self.generic_visit(node)

    def _resolve(self, dotted: str) -> str:
        head, _, rest = dotted.partition(".")
        if head in self.aliases:
            return self.aliases[head] + ("." + rest if rest else "")
        return dotted

    # calls -------------------------------------------------------------------------------------------
    def visit_Name(self, node: ast.Name) -> None:
        if node.id in DANGEROUS_BUILTINS - {"type", "object", "super_"} and id(node) not in self.called_names:
            self.add("dynamic_attribute", node, f"{node.id} used as a value: aliasing it hides what is accessed")
        if node.id in ("KERNEL_STATS", "remote_builder", "remote_extension_builder", "__builtins__", "__loader__",
                       "__spec__"):
            self.add("patching", node, f"{node.id}: kernelgym's bookkeeping and the interpreter's internals are off limits")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name):
            self.called_names.add(id(node.func))
        name = self._resolve(_dotted(node.func))
        if name in ("getattr", "hasattr") and len(node.args) >= 2:
            attr = node.args[1]
            if not (isinstance(attr, ast.Constant) and isinstance(attr.value, str)):
                self.add("dynamic_attribute", node, f"{name}() with a computed name hides what is accessed")
            elif attr.value.startswith("_"):
                self.add("dynamic_attribute", node, f"{name}(..., {attr.value!r}): private attributes are off limits")
        for forbidden, why in FORBIDDEN_CALLS.items():
            if name == forbidden or ("." in forbidden and name.endswith("." + forbidden)):
                self.add("forbidden_call", node, f"{forbidden}(): {why}")
        if self.low_precision_forbidden and (
            name.endswith((".half", ".bfloat16")) or (name.endswith(".to") and _mentions_low_precision(node))
        ):
            self.add("precision_downgrade", node, f"{name.split('.')[-1]}(): computing below the task's precision")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        dotted = self._resolve(_dotted(node))
        if dotted.startswith("os.") and not dotted.startswith(tuple(OS_ALLOWED)):
            self.add("os_access", node, f"{dotted}: solutions may only use os.environ and os.path")
        if node.attr in ("modules", "_getframe", "settrace", "setprofile", "meta_path", "path_hooks") and (
                _dotted(node.value).endswith("sys") or dotted.startswith("sys.")):
            self.add("introspection", node, f"{dotted}: reaching into the interpreter is not allowed")
        if self.low_precision_forbidden and dotted in LOW_PRECISION_DTYPES:
            self.add("precision_downgrade", node, f"{dotted}: computing below the task's precision")
        if dotted.startswith(("torch._C", "torch.utils._python_dispatch", "torch.profiler", "torch.autograd.profiler",
                              "torch._dynamo", "torch.overrides")):
            self.add("introspection", node, f"{dotted}: torch internals that can blind the judge are off limits")
        if node.attr in ("__dict__", "__setattr__", "__getattribute__", "__delattr__", "__setitem__", "__init_subclass__",
                         "__class_getitem__", "__reduce__", "__mro__", "__bases__", "__closure__", "__self__"):
            self.add("introspection", node, f"{dotted or node.attr}: rewriting objects through their internals is not allowed")
        if node.attr in ("KERNEL_STATS", "remote_builder", "remote_extension_builder", "cuda_compile_only", "_clock_ns"):
            self.add("patching", node, f"{node.attr}: kernelgym's bookkeeping is off limits")
        if dotted.startswith(("sys.modules", "builtins.")) or node.attr in ("__globals__", "__subclasses__", "f_back", "f_locals", "f_globals", "__builtins__", "__code__"):
            self.add("introspection", node, f"{dotted or node.attr}: reaching into the harness is not allowed")
        self.generic_visit(node)

    # assignments -------------------------------------------------------------------------------------
    def _check_target(self, target: ast.AST, value: ast.AST | None) -> None:
        if isinstance(target, ast.Subscript):
            base = self._resolve(_dotted(target.value))
            if base.split(".")[0] in self._imported_roots() and not base.startswith("os.environ"):
                self.add("patching", target, f"item assignment into {base}: imported modules are off limits")
        if isinstance(target, ast.Attribute):
            base = self._resolve(_dotted(target.value))
            if base and base.split(".")[0] in self._imported_roots():
                self.add("patching", target, f"assignment to {base}.{target.attr}: patching imported modules is not allowed")
            if target.attr in PROTECTED_ATTRIBUTES:
                self.add("patching", target, f"assignment to {_dotted(target) or target.attr}: the judge's functions are off limits")
            if target.attr in PRECISION_FLAGS and not (isinstance(value, ast.Constant) and value.value is False):
                self.add("precision_downgrade", target, f"{target.attr}: reduced-precision math is not allowed")
        elif isinstance(target, ast.Tuple | ast.List):
            for element in target.elts:
                self._check_target(element, None)

    def _imported_roots(self) -> set[str]:
        roots = {v.split(".")[0] for v in self.aliases.values()}
        return roots | {k for k, v in self.aliases.items()}

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and ("/proc/" in node.value or "/dev/shm" in node.value):
            self.add("introspection", node, "paths into /proc or /dev/shm reach other processes")
        if isinstance(node.value, str) and "\n" not in node.value and (
                node.value.startswith("__") or node.value.endswith("__")):
            self.add("introspection", node, f"{node.value!r}: names of interpreter internals, spelled as strings")
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._check_target(target, node.value)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_target(node.target, node.value)
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        self.add("global_state", node, f"global {', '.join(node.names)}: state kept between calls can cache results")
        self.generic_visit(node)

    def visit_Try(self, node: ast.Try) -> None:
        self.add("try_except", node, "try/except can hide a failing kernel behind a fallback")
        self.generic_visit(node)

    visit_TryStar = visit_Try

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for base in node.bases:
            name = _dotted(base)
            if name in TORCH_TENSOR_BASES or self._resolve(name) in ("torch.Tensor",):
                self.add("tensor_subclass", node, f"class {node.name}({name}): tensor subclasses are not allowed")
            if name == "Model":
                self.add("inherits_reference", node, f"class {node.name}(Model): ModelNew must not inherit the reference")
        self.generic_visit(node)


def _mentions_low_precision(node: ast.Call) -> bool:
    for arg in [*node.args, *(k.value for k in node.keywords)]:
        text = _dotted(arg)
        if text.endswith(("float16", "half", "bfloat16")):
            return True
    return False


def _structure(tree: ast.Module, backend: Backend, checker: _Checker) -> list[_Finding]:
    """ModelNew must exist, and forward must reach one of the backend's own kernels."""
    findings: list[_Finding] = []
    classes = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    model_new = classes.get("ModelNew")
    if model_new is None:
        return [_Finding("no_model_new", 1, "the module defines no class ModelNew")]
    kernels = _own_kernels(tree, backend, checker)
    if not kernels:
        what = " or ".join(f"@{d}" for d in backend.kernel_decorators[:1]) or " / ".join(backend.kernel_builders[:2])
        return [_Finding("no_own_kernel", model_new.lineno, f"no {backend.name} kernel is defined ({what})")]
    functions = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    methods = {n.name: n for n in model_new.body if isinstance(n, ast.FunctionDef)}
    forward = methods.get("forward")
    if forward is None:
        return [_Finding("no_forward", model_new.lineno, "ModelNew defines no forward")]
    findings.extend(_stateful(forward, methods))
    if not _reaches(forward, kernels, functions, methods):
        findings.append(_Finding("kernel_not_called", forward.lineno,
                                 f"forward never calls the {backend.name} kernel it defines ({', '.join(sorted(kernels))})"))
    return findings


def _own_kernels(tree: ast.Module, backend: Backend, checker: _Checker) -> set[str]:
    """Names bound to the backend's kernels: decorated functions, or variables assigned from a builder call."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and backend.kernel_decorators:
            for dec in node.decorator_list:
                target = dec.func if isinstance(dec, ast.Call) else dec
                if _dotted(target) in backend.kernel_decorators:
                    names.add(node.name)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and backend.kernel_builders:
            called = checker._resolve(_dotted(node.value.func))
            if any(called == b or called.endswith("." + b) for b in backend.kernel_builders):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        names.add(target.id)
                    elif isinstance(target, ast.Attribute):
                        names.add(target.attr)
    return names


def _reaches(start: ast.FunctionDef, kernels: set[str], functions: dict, methods: dict) -> bool:
    """Does `start` (or a helper it calls, transitively) mention a kernel name?"""
    seen: set[str] = set()
    stack = [start]
    while stack:
        fn = stack.pop()
        if fn.name in seen:
            continue
        seen.add(fn.name)
        for node in ast.walk(fn):
            name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
            if name in kernels:
                return True
            if name in functions and name not in seen:
                stack.append(functions[name])
            if name in methods and name not in seen:
                stack.append(methods[name])
    return False


_MUTATING_METHODS = {"append", "extend", "update", "setdefault", "insert", "add", "__setitem__", "copy_", "fill_"}


def _stateful(forward: ast.FunctionDef, methods: dict) -> list[_Finding]:
    """forward (and the methods it calls) must not keep results between calls: that is how caches cheat."""
    findings = []
    for fn in [forward, *(m for name, m in methods.items() if name not in ("__init__", "forward"))]:
        for node in ast.walk(fn):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, ast.AugAssign | ast.AnnAssign) else []
            for target in targets:
                base = target.value if isinstance(target, ast.Subscript) else target
                if isinstance(base, ast.Attribute) and _dotted(base).startswith("self."):
                    findings.append(_Finding("stateful_forward", node.lineno,
                                             f"{fn.name} stores {_dotted(base)}: state kept between calls can cache results"))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                owner = _dotted(node.func.value)
                if node.func.attr in _MUTATING_METHODS and owner.startswith("self.") and node.func.attr not in ("copy_", "fill_"):
                    findings.append(_Finding("stateful_forward", node.lineno,
                                             f"{fn.name} mutates {owner}: state kept between calls can cache results"))
    return findings
