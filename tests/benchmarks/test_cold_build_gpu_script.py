"""benchmarks/judge_speed/cold_build_gpu.py's curve: the steady rate leaves out the pipeline's filling and its
drain."""

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "judge_speed" / "cold_build_gpu.py"


def _script():
    spec = importlib.util.spec_from_file_location("cold_build_gpu", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_straggler_at_the_end_does_not_set_the_steady_rate():
    script = _script()
    # two workers finish a candidate a second each; the last one, a 30 s build, comes in long after
    done_at = [float(t) for t in range(1, 13)] + [40.0]
    assert script._steady(done_at, workers=2) == 60.0
    assert 60 * len(done_at) / max(done_at) < 20  # the burst's rate, which the straggler set


def test_too_few_candidates_for_a_steady_window_give_none():
    assert _script()._steady([1.0, 2.0, 3.0], workers=2) is None
