"""The trusted side's reading of GPU output descriptions (pure: runs without a GPU)."""

from __future__ import annotations

import pytest

from kernelgym.evaluation import rules
from kernelgym.evaluation.outcome import Outcome
from kernelgym.evaluation.outputs import refuse_aliased_inputs


def _wire(handle: str, offset: int = 0) -> dict:
    return {"dtype": "float32", "shape": [4], "ipc": {"handle": handle, "offset": offset}}


INPUTS = [[_wire("aa" * 32), {"value": 3}], [_wire("bb" * 32)]]


def test_outputs_in_memory_of_their_own_pass_through_unchanged():
    outputs = [[_wire("cc" * 32)], [_wire("dd" * 32)]]
    assert refuse_aliased_inputs(outputs, INPUTS) is outputs


@pytest.mark.parametrize(
    "outputs",
    [
        [[_wire("cc" * 32)], [_wire("aa" * 32, offset=64)]],  # a handle the reference exported, re-sent
        [[{"error": "an output shares memory with an input", "aliases_input": True}], [_wire("dd" * 32)]],
    ],
    ids=["handle-of-an-input", "said-by-the-candidate"],
)
def test_an_input_handed_back_as_an_output_is_the_aliasing_rule(outputs):
    with pytest.raises(Outcome) as caught:
        refuse_aliased_inputs(outputs, INPUTS)
    assert caught.value.finding.rule == rules.OUTPUT_ALIASES_INPUT.name


def test_malformed_descriptions_are_left_to_the_comparison():
    outputs = [["not a dict"], [{"ipc": "not a dict"}]]
    assert refuse_aliased_inputs(outputs, INPUTS) is outputs
