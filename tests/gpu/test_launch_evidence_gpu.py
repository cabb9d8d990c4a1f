"""On a real GPU, with the launch evidence on (EvalOptions.launch_evidence: every kernel launch of the
candidate watched from outside it decides whose code did the work): the honest Triton and CUDA examples stay
`ok`, their launches all seen and their own; every GPU cheat of tests/adversarial still earns nothing.

What has to hold before launch_evidence becomes the default (docs/gpu-own-code-wiring.md). The same cheats
with the option off are tests/adversarial/test_corpus.py's; benchmarks/gpu/gpu_integrity.sh runs both.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from kernelgym.evaluation.options import EvalOptions
from kernelgym.evaluation.result import Verdict
from kernelgym.solutions import examples
from kernelgym.tasks import bundled

pytestmark = pytest.mark.gpu


def _corpus():
    """tests/adversarial/test_corpus.py (no package: loaded by its path), for its cheats and its check."""
    path = Path(__file__).parents[1] / "adversarial" / "test_corpus.py"
    spec = importlib.util.spec_from_file_location("launch_evidence_corpus", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


CORPUS = _corpus()
GPU_CHEATS = [c for c in CORPUS.CHEATS if c.backend != "cpp"]  # none is in a group (test_corpus.py)


@pytest.fixture(scope="module")
def watched_pool():
    import torch

    from kernelgym.workers.pool import EvalPool

    if not torch.cuda.is_available():
        pytest.fail("the gpu tests need a CUDA GPU")
    with EvalPool(workers=2, options=EvalOptions(timing_budget_s=1.0, launch_evidence=True)) as pool:
        yield pool


@pytest.mark.parametrize("example", examples("triton") + examples("cuda"),
                         ids=lambda e: f"{e.backend}:{e.task_id}")
def test_honest_examples_stay_ok_with_every_launch_seen(watched_pool, example):
    result = watched_pool.evaluate(bundled().get(example.task_id), example.source, backend=example.backend,
                                   size="gpu")
    launches = result.profile.launches if result.profile else {}
    print("\nRESULT", example.backend, example.task_id, result.verdict.value, result.speedup,
          result.stage_s.get("profile"), launches, result.static.warnings if result.static else None)
    assert result.verdict is Verdict.OK, (result.reasons, launches, result.output_tail[-2000:])
    assert launches.get("available"), launches
    assert "own_code_unverified" not in [r.rule for r in result.reasons], (result.reasons, launches)
    timed = launches["launches"].get("timed", {})
    assert any(name.startswith("own/") or "/graph" in name for name in timed), timed


@pytest.mark.parametrize("cheat", GPU_CHEATS, ids=lambda c: c.name)
def test_gpu_cheats_earn_nothing_with_launch_evidence(watched_pool, cheat):
    result = CORPUS.evaluate(watched_pool, cheat)
    if result.verdict is Verdict.OK and (result.speedup or 0) >= (cheat.max_speedup or
                                                                  CORPUS.DEFUSED_MAX_SPEEDUP):
        result = CORPUS.evaluate(watched_pool, cheat)  # as test_corpus.py: a speed that holds again
    CORPUS.assert_no_credit(cheat, result)

