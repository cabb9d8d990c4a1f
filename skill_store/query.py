"""The retrieval query for a task: what its reference does, read from the source without running it.

The raw module is mostly boilerplate (imports, `get_inputs`, `super().__init__()`), so the query is built
from the parts that say what the computation is: the task's name, the model's docstring, the ops it calls
(`torch.matmul`, `nn.Conv2d`, `x.sum`, `@`), the keyword arguments it passes (`groups=`, `stride=`), the
names of its shape constants, and a guess of whether it is memory- or compute-bound.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from kernelgym.skill_store.tokens import tokenize

# Ops whose arithmetic grows faster than their data: a task containing one is (usually) compute-bound.
COMPUTE_OPS = frozenset(
    """
matmul mm bmm addmm baddbmm einsum linear bilinear conv1d conv2d conv3d convtranspose1d convtranspose2d
convtranspose3d conv_transpose1d conv_transpose2d conv_transpose3d lstm gru rnn multiheadattention
scaled_dot_product_attention tensordot
""".split()
)

_BINOPS = {
    ast.Add: "add",
    ast.Sub: "sub",
    ast.Mult: "mul",
    ast.Div: "div",
    ast.Pow: "pow",
    ast.MatMult: "matmul",
}
# Calls that only move or describe data; they say nothing about which technique applies.
_IGNORED_CALLS = frozenset(
    """
view reshape size contiguous super randn rand zeros ones empty tensor float to cuda cpu append range len
parameter int list tuple print dim numel unsqueeze squeeze flatten expand repeat clone detach
""".split()
)


@dataclass
class QueryConfig:
    name_weight: int = 2  # a task's name lists its ops ("Gemm_BiasAdd_ReLU"): the strongest signal
    op_weight: int = 2
    doc_weight: int = 1
    keyword_weight: int = 1
    constant_weight: int = 1
    bound_weight: int = 1


@dataclass
class TaskQuery:
    name: str = ""
    category: str = ""
    doc: str = ""
    ops: list[str] = field(default_factory=list)
    keywords: list[str] = field(default_factory=list)
    constants: list[str] = field(default_factory=list)
    bound: str = "any"

    def tokens(self, config: QueryConfig | None = None) -> list[str]:
        c = config or QueryConfig()
        parts = [
            (f"{self.name} {self.category}", c.name_weight),
            (" ".join(self.ops), c.op_weight),
            (self.doc, c.doc_weight),
            (" ".join(self.keywords), c.keyword_weight),
            (" ".join(self.constants), c.constant_weight),
            (f"{self.bound} bound" if self.bound != "any" else "", c.bound_weight),
        ]
        out: list[str] = []
        for text, weight in parts:
            # Each distinct token once per part, repeated by the part's weight: a long docstring should not
            # outvote the op list by sheer length.
            out.extend(list(dict.fromkeys(tokenize(text))) * weight)
        return out

    def text(self) -> str:
        """A readable one-paragraph form (shown to an LLM reranker)."""
        bits = [f"task {self.name} ({self.category})" if self.category else f"task {self.name}"]
        if self.doc:
            bits.append(self.doc)
        if self.ops:
            bits.append("ops: " + ", ".join(self.ops))
        if self.keywords:
            bits.append("arguments: " + ", ".join(self.keywords))
        if self.constants:
            bits.append("shape constants: " + ", ".join(self.constants))
        bits.append(f"likely {self.bound}-bound")
        return "; ".join(bits)


def query_for_task(task) -> TaskQuery:
    """The query for a kernelgym Task (anything with .name, .category and .source)."""
    query = query_for_source(getattr(task, "source", ""))
    query.name = re.sub(r"[_\s]+", " ", str(getattr(task, "name", ""))).strip()
    query.category = str(getattr(task, "category", "") or "").replace("_", " ")
    return query


def query_for_source(source: str) -> TaskQuery:
    """The query for a reference module's source text; unparsable source falls back to its words."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return TaskQuery(doc=source[:2000], bound="any")
    ops: list[str] = []
    keywords: list[str] = []
    constants: list[str] = []
    doc = ""
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            doc = ast.get_docstring(node) or ""
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            constants.extend(t.id for t in targets if isinstance(t, ast.Name) and t.id != "KERNELGYM")
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    for node in ast.walk(model or tree):
        if isinstance(node, ast.Call):
            name = _call_name(node.func)
            if name and not name.startswith("_") and name not in _IGNORED_CALLS:
                ops.append(name)
            keywords.extend(k.arg for k in node.keywords if k.arg)
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            ops.append(_BINOPS[type(node.op)])
    ops = list(dict.fromkeys(ops))
    bound = "compute" if any(op.lower() in COMPUTE_OPS for op in ops) else "memory"
    return TaskQuery(
        doc=doc,
        ops=ops,
        keywords=list(dict.fromkeys(keywords)),
        constants=list(dict.fromkeys(constants)),
        bound=bound,
    )


def _call_name(func: ast.expr) -> str:
    # torch.nn.functional.softmax -> softmax; nn.Conv2d -> Conv2d; x.sum -> sum; relu -> relu
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


def query_for_text(text: str) -> TaskQuery:
    """A free-text query (the CLI's search): the words themselves, bound guessed from them."""
    lowered = {t.lower() for t in re.findall(r"[A-Za-z0-9_]+", text)}
    bound = "compute" if lowered & COMPUTE_OPS else "any"
    return TaskQuery(doc=text, bound=bound)
