"""The build times the cpp contract quotes to the model agree with the figures the README reports (the
load_inline figure once said 12 s after the split build had brought it to about 3 s)."""

from __future__ import annotations

import re
from pathlib import Path

from kernelgym.backends.contracts import CPP_CONTRACT

README = Path(__file__).resolve().parents[2] / "README.md"


def test_load_inline_build_time_in_the_cpp_contract_is_within_the_readmes_measured_range():
    readme = " ".join(README.read_text().split())
    measured = re.search(r"a new build took ([\d.]+)-([\d.]+) s against", readme)
    assert measured, "the README's cpp bullet no longer states the new load_inline build time"
    low, high = float(measured.group(1)), float(measured.group(2))
    quoted = re.search(r"load_inline\(.*?about ([\d.]+) s", " ".join(CPP_CONTRACT.split()))
    assert quoted, "the cpp contract no longer quotes load_inline's build time"
    assert low - 0.5 <= float(quoted.group(1)) <= high
