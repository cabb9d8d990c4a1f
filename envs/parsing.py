"""From the model's reply to a solution: the last Python code block, or the whole reply if it is Python.

A reply without code is not an error: `parse_reply` says so in `problem`, and the environment turns that
into a failed turn whose feedback tells the model what it should have sent.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

DONE_MARKER = "DONE"
PYTHON_TAGS = frozenset({"", "python", "py", "python3", "py3"})


@dataclass(frozen=True)
class CodeBlock:
    language: str
    code: str
    closed: bool


@dataclass(frozen=True)
class ParsedReply:
    code: str | None  # the solution module, or None when the reply holds none
    done: bool  # the reply asks to end the episode (a line that is just the done marker)
    origin: str  # "fenced", "unclosed_fence" (cut off mid-block), "whole_reply" or "none"
    problem: str = ""  # why no code was found, in words for the model


def code_blocks(text: str) -> tuple[list[CodeBlock], list[str]]:
    """Fenced blocks (``` or ~~~, optional language tag) and the lines outside them."""
    blocks: list[CodeBlock] = []
    outside: list[str] = []
    fence = ""
    language = ""
    body: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not fence:
            opener = _fence_of(stripped)
            if opener:
                fence, language, body = opener, stripped[len(opener):].strip().split(" ")[0].lower(), []
            else:
                outside.append(line)
        elif stripped.startswith(fence[0] * len(fence)) and not stripped.strip(fence[0]):
            blocks.append(CodeBlock(language, "\n".join(body), closed=True))
            fence = ""
        else:
            body.append(line)
    if fence:  # the reply ended inside a block (e.g. the model ran out of tokens)
        blocks.append(CodeBlock(language, "\n".join(body), closed=False))
    return blocks, outside


def _fence_of(stripped: str) -> str:
    for char in "`~":
        if stripped.startswith(char * 3):
            run = len(stripped) - len(stripped.lstrip(char))
            # A one-line ```code``` is not an opening fence.
            if char == "`" and char * 3 in stripped[run:]:
                return ""
            return char * run
    return ""


def is_done(outside_lines: list[str], marker: str = DONE_MARKER) -> bool:
    return any(line.strip().rstrip(".!").strip().upper() == marker.upper() for line in outside_lines)


def _looks_like_a_module(text: str) -> bool:
    """Whole-reply code must parse and do something: prose like `hello` parses, yet is no module."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    return any(not isinstance(node, ast.Expr) for node in tree.body)


def parse_reply(reply: str, done_marker: str = DONE_MARKER) -> ParsedReply:
    if not isinstance(reply, str):
        reply = reply.decode("utf-8", "replace") if isinstance(reply, bytes | bytearray) else str(reply)
    blocks, outside = code_blocks(reply)
    done = is_done(outside, done_marker)
    python = [b for b in blocks if b.language in PYTHON_TAGS and b.code.strip()]
    if python:
        last = python[-1]
        return ParsedReply(last.code.strip("\n") + "\n", done, "fenced" if last.closed else "unclosed_fence")
    if blocks:
        languages = ", ".join(sorted({b.language or "untagged" for b in blocks}))
        return ParsedReply(None, done, "none", f"the reply has code blocks ({languages}) but none is a "
                                               "Python module; send the whole solution module in one "
                                               "```python block")
    if not done and reply.strip() and _looks_like_a_module(reply):
        return ParsedReply(reply.strip("\n") + "\n", False, "whole_reply")
    if done:
        return ParsedReply(None, True, "none")
    return ParsedReply(None, False, "none", "the reply holds no code; send the whole solution module "
                                            "(defining ModelNew) in one ```python block, or reply "
                                            f"{done_marker} to finish")
