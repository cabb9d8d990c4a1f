"""Reply parsing: the last Python block is the solution; no code is a reason, never an exception."""

from __future__ import annotations

import string

import numpy as np
import pytest

from kernelgym.envs.parsing import parse_reply
from kernelgym.envs.spaces import CHARSET, action_space, fit_text, observation_space, speedup_array

MODULE = "import torch\n\nclass ModelNew(torch.nn.Module):\n    pass\n"


def test_last_python_block_wins():
    reply = f"First try:\n```python\nx = 1\n```\nBetter:\n```python\n{MODULE}```\nThat's it."
    parsed = parse_reply(reply)
    assert parsed.code == MODULE and parsed.origin == "fenced" and not parsed.done


def test_untagged_block_and_tilde_fence():
    assert parse_reply(f"```\n{MODULE}```").code == MODULE
    assert parse_reply(f"~~~py\n{MODULE}~~~").code == MODULE


def test_other_language_blocks_are_skipped():
    reply = f"```python\n{MODULE}```\nThe C++ part again:\n```cpp\nint main() {{}}\n```"
    assert parse_reply(reply).code == MODULE
    only_cpp = parse_reply("```cpp\nint main() {}\n```")
    assert only_cpp.code is None and "cpp" in only_cpp.problem and "python" in only_cpp.problem


def test_whole_reply_module():
    parsed = parse_reply(MODULE)
    assert parsed.code == MODULE and parsed.origin == "whole_reply"


@pytest.mark.parametrize("reply", ["", "   ", "hello", "I think we should use tiling.", "print", "x + y"])
def test_prose_is_no_code(reply):
    parsed = parse_reply(reply)
    assert parsed.code is None and not parsed.done and "no code" in parsed.problem


def test_unclosed_fence_is_still_code():
    parsed = parse_reply(f"```python\n{MODULE}")  # the model ran out of tokens mid-block
    assert parsed.code == MODULE and parsed.origin == "unclosed_fence"


def test_inline_triple_backticks_are_not_a_fence():
    assert parse_reply("use ```x``` here").code is None


@pytest.mark.parametrize("reply", ["DONE", "done", " DONE.\n", "I cannot do better.\nDONE"])
def test_done(reply):
    parsed = parse_reply(reply)
    assert parsed.done and parsed.code is None


def test_done_with_a_final_solution():
    parsed = parse_reply(f"```python\n{MODULE}```\nDONE")
    assert parsed.done and parsed.code == MODULE


def test_done_inside_code_does_not_count():
    parsed = parse_reply("```python\nDONE = 1\n```")
    assert not parsed.done and parsed.code == "DONE = 1\n"


def test_custom_done_marker():
    assert parse_reply("<finished>", done_marker="<finished>").done
    assert not parse_reply("DONE", done_marker="<finished>").done


def test_random_text_never_raises():
    space = action_space()
    space.seed(0)
    for _ in range(5):
        parse_reply(space.sample())
    parse_reply(b"```python\nx = 1\n```")  # bytes are decoded


def test_text_spaces_accept_code():
    space = observation_space(4)
    assert 'def f(x):\n\treturn {"a": x[0]} # ok\n' in space["prompt"]
    assert "" in space["feedback"]  # min_length 0
    assert set(string.ascii_letters + string.digits + string.punctuation) <= set(CHARSET)


def test_fit_text_maps_unicode_and_truncates():
    text = fit_text("error: \u2018x\u2019 was not declared \u2014 \u00b5s \u4e2d")
    assert text == "error: 'x' was not declared - us ?"
    assert text in action_space()
    cut = fit_text("a" * 5000, 1000)
    assert len(cut) == 1000 and cut.endswith("[truncated]")


def test_speedup_array_is_fresh_and_bounded():
    a, b = speedup_array(2.0), speedup_array(2.0)
    assert a is not b and a.dtype == np.float32 and a.shape == (1,)
    assert speedup_array(None)[0] == 0 and speedup_array(float("nan"))[0] == 0
    assert speedup_array(1e9)[0] == 1000.0
