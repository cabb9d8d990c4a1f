"""The search baselines (evolve, map_elites), their parameter templates, the mutation policy and the
Optuna tuner; the searches run with the real cpp judge on a tiny budget."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

import kernelgym
from kernelgym.agents.baselines import evolve, map_elites, templates
from kernelgym.agents.baselines.search import Node, load_state
from kernelgym.agents.policies import make_policy
from kernelgym.agents.policies.mutate import MutationConfig, mutate
from kernelgym.agents.policies.scripted import ScriptedPolicy, fence
from kernelgym.agents.policy import BasePolicy

RELU = "bundled/L1/1_ReLU"
SOLUTIONS = Path(kernelgym.__file__).parent / "solutions"
QUICK_JUDGE = {"timing_budget_s": 1.0}  # these tests check the search loop, not the timing


@pytest.fixture
def env_factory(pool):
    """gym.make on the bundled suite, cpp judge, cpu size, on the session's pool."""
    import gymnasium as gym

    made = []

    def make(env_id: str = "KernelGym-L1-v0", **kwargs):
        env = gym.make(env_id, backend="cpp", size="cpu", pool=pool, eval_options=dict(QUICK_JUDGE), **kwargs)
        made.append(env)
        return env

    yield make
    for env in made:
        env.close()


def _node(i: int, speedup: float | None, verified: bool = False, cell: int = 3, visits: int = 0) -> Node:
    return Node(
        id=i,
        parent=None,
        operator="rewrite",
        source_hash=str(i),
        source=f"# {i}",
        verdict="ok",
        correct=speedup is not None,
        speedup=speedup,
        verified=verified,
        call=i + 1,
        visits=visits,
        descriptor={"bound": "memory", "roofline_bin": 2, "kernels": 1, "tile_log2": cell},
    )


# templates and the mutation policy --------------------------------------------------------------------------


def test_cpp_template_parameters_and_their_substitution():
    source = (SOLUTIONS / "cpp/level1/2_Matmul_Square.py").read_text()
    params = {p.name: p for p in templates.find_params(source)}
    assert {"MR", "KC", "unroll 8", "omp schedule"} <= set(params)
    assert "VL" not in params and "NR" not in params  # defined twice (#ifdef) / not a literal
    assert params["KC"].value == "256" and "128" in params["KC"].choices
    assert len(params["unroll 8"].spans) == 3 and len(params["omp schedule"].spans) == 2
    out = templates.apply(
        source, list(params.values()), {"KC": "128", "unroll 8": "4", "omp schedule": "guided"}
    )
    assert "constexpr int64_t KC = 128;" in out and "#pragma GCC unroll 8" not in out
    assert out.count("#pragma GCC unroll 4") == 3 and out.count("schedule(guided)") == 2
    assert templates.apply(source, list(params.values()), {}) == source


def test_triton_template_parameters():
    source = (SOLUTIONS / "triton/level1/2_Matmul_Square.py").read_text()
    params = {p.name: p for p in templates.find_params(source)}
    assert {"BM", "BN", "BK", "GROUP_M", "num_warps", "num_stages"} <= set(params)
    assert all(int(c) & (int(c) - 1) == 0 for c in params["BM"].choices)  # powers of two stay so
    out = templates.apply(source, list(params.values()), {"BM": "64", "num_warps": "8"})
    assert "BM, BN, BK = 64, 128, 16" in out and "num_warps=8" in out


def test_normalised_source_ignores_comments_and_spacing():
    a = (
        'n = m // 4  # quarter\n_lib = load_cpp(r"""\nconstexpr int K = 4;  // four\n'
        '#pragma GCC unroll 4\n""")\n'
    )
    b = 'n = m // 4\n\n_lib = load_cpp(r"""\nconstexpr int K = 4;\n#pragma GCC unroll 4\n""")'
    assert templates.source_hash(a) == templates.source_hash(b)
    assert templates.source_hash(a) != templates.source_hash(b.replace("K = 4", "K = 8"))
    assert templates.source_hash(a) != templates.source_hash(b.replace("m // 4", "m // 8"))


def test_mutation_policy_seeds_then_moves_parameters():
    policy = make_policy("mutate:cpp?seed=3")
    seed_reply = policy.act({"prompt": "", "turn": 0}, {"task_id": RELU, "attempt": 0})
    assert (SOLUTIONS / "cpp/level1/1_ReLU.py").read_text().strip() in seed_reply
    parent = (SOLUTIONS / "cpp/level1/23_Sum_Dim.py").read_text()
    info = {"task_id": "bundled/L1/23_Sum_Dim", "attempt": 1, "parent_source": parent}
    child = policy.act({"prompt": "", "turn": 0}, info)
    assert child == policy.act({"prompt": "", "turn": 0}, info)  # reproducible
    assert 1 <= len(child.meta["mutated"].split("; ")) <= 2 and fence(parent) != child
    # Instructions steer the kind of parameter moved.
    for i in range(5):
        _, changes = mutate(parent, random.Random(i), MutationConfig(), "unroll the loops")
        assert changes and all(name.startswith("unroll") for name in changes)


# archive, selection, meta-prompts, tuning (no judge) -----------------------------------------------------


def test_archive_insertion_and_replacement():
    nodes = [
        _node(0, 1.2, cell=3),
        _node(1, 1.5, True, cell=3),
        _node(2, 1.1, cell=5),
        _node(3, None, cell=6),
    ]
    archive: dict[str, int] = {}
    assert map_elites.insert(archive, nodes, nodes[0])  # empty cell
    assert map_elites.insert(archive, nodes, nodes[1])  # better elite (verified) replaces it
    assert not map_elites.insert(archive, nodes, nodes[0])  # a worse one does not
    assert map_elites.insert(archive, nodes, nodes[2])  # another cell
    assert not map_elites.insert(archive, nodes, nodes[3])  # failed candidates never enter
    assert sorted(archive.values()) == [1, 2] and len(archive) == 2


def test_evolve_selection_exploits_then_explores():
    fit, weak = _node(0, 2.0, True, visits=0), _node(1, 1.1, cell=4, visits=0)
    assert evolve.select([fit, weak], exploration=0.5, novelty=0.0) is fit
    fit.visits = 50  # a much-visited parent makes way for the unvisited one
    assert evolve.select([fit, weak], exploration=2.0, novelty=0.0) is weak
    failed = _node(2, None)
    assert evolve.select([failed], 0.5, 0.2) is failed  # nothing correct: repair the failures
    assert evolve.select([], 0.5, 0.2) is None


def test_meta_prompt_survival():
    prompts: list[dict] = []
    for text in ("tile the loops", "change the schedule", "unroll", "fuse"):
        map_elites.new_prompt(prompts, text, None)
    for p, scores in zip(prompts, ([2.0, 1.8], [0.1], [0.5], [])):
        p["uses"], p["score_sum"] = len(scores), sum(scores)
    child = map_elites.evolve_prompts(prompts, size=4, rng=random.Random(0))
    assert child["parent"] == 0 and child["text"].startswith("tile the loops")
    alive = {p["id"] for p in prompts if p["alive"]}
    assert alive == {0, 2, 3, 4}  # the worst used one died; the best, the untried and the child live
    rewritten = map_elites.evolve_prompts(prompts, size=4, rng=random.Random(0), rewrite="Block for L1.")
    assert rewritten["text"] == "Block for L1." and prompts[0]["alive"]


def test_tuner_asks_valid_configurations_and_rebuilds_from_history():
    from kernelgym.agents.baselines.tuning import TemplateTuner, TuningConfig

    source = (SOLUTIONS / "cpp/level1/23_Sum_Dim.py").read_text()
    tuner = TemplateTuner(source, 0.5, TuningConfig(max_params=3, seed=0))
    names = {p.name for p in tuner.params}
    assert len(names) == 3
    trial, out, values = tuner.ask()
    assert set(values) == names and out != source or values == templates.current_values(tuner.params)
    tuner.tell(trial, values, 1.7)
    again = TemplateTuner(source, 0.5, TuningConfig(max_params=3, seed=0), history=tuner.history)
    assert again.best() == (values, 1.7) and len(again.study.trials) == 2


def test_plateau_and_reply_limits_stop_a_search():
    from types import SimpleNamespace

    from kernelgym.agents.baselines.search import Search

    env = SimpleNamespace(
        unwrapped=SimpleNamespace(config=SimpleNamespace(max_turns=20, trajectory_path=None))
    )
    search = Search(env, "evolve", RELU, 0, budget=None, state_dir=None, max_proposals_factor=2, patience=2)
    assert search.state.budget == 20 and search.max_proposals == 40 and not search.should_stop()
    search.state.curve = [{"best_rank": r} for r in ([0, 1.1], [0, 1.3], [0, 1.3], [0, 1.3])]
    search.state.calls = 4
    assert search.should_stop() and search.state.stop_reason == "plateau"
    search.state.curve.append({"best_rank": [1.4, 1.4]})  # an improvement
    search.state.calls, search.state.proposals = 5, 40
    assert search.should_stop() and search.state.stop_reason == "proposals"


# searches with the real judge ----------------------------------------------------------------------------


def _judged_lines(path: Path) -> int:
    return sum(1 for line in path.read_text().splitlines() if line.strip()) if path.exists() else 0


@pytest.mark.slow
def test_budget_counts_judge_calls_only(env_factory, relu_solution, tmp_path):
    env = env_factory(max_turns=4)
    spaced = relu_solution.replace("\n\n", "\n\n\n") + "\n# a comment\n"
    policy = ScriptedPolicy([fence(relu_solution), fence(spaced), "just prose", "DONE"])
    record = evolve.run_episode(
        env, policy, RELU, evolve.EvolveConfig(budget=2, skills=0, state_dir=str(tmp_path))
    )
    state = load_state(tmp_path / "evolve" / "bundled_L1_1_ReLU__0.json")
    # The duplicate (same source up to spacing and comments) and the prose were not judged; DONE stopped it.
    assert state.calls == 1 and state.proposals == 4 and state.stop_reason == "done"
    assert len(record.turns) == 1 and record.turns[0].verdict == "ok"


@pytest.mark.slow
def test_evolve_finds_at_least_the_seed_and_saves_its_graph(env_factory, tmp_path):
    env = env_factory(max_turns=3)
    # ReLU exposes one parameter (5 values), so duplicates are common: room for them.
    config = evolve.EvolveConfig(skills=0, state_dir=str(tmp_path), max_proposals_factor=10)
    record = evolve.run_episode(env, make_policy("mutate:cpp"), RELU, config)
    path = tmp_path / "evolve" / "bundled_L1_1_ReLU__0.json"
    graph = json.loads(path.read_text())
    assert graph["calls"] == 3 and graph["finished"] and graph["stop_reason"] == "budget"
    assert path.with_suffix(".png").stat().st_size > 0
    seed, *children = graph["nodes"]
    assert seed["operator"] == "seed" and seed["correct"] and all(c["parent"] is not None for c in children)
    best = max(n["speedup"] or 0 for n in graph["nodes"] if n["correct"])
    assert record.speedup == best >= seed["speedup"]
    curve = [c["best_rank"] for c in graph["curve"]]
    assert curve == sorted(curve) and len(record.turns) == 3


class _CrashAt(BasePolicy):
    """The mutation policy until the n-th reply, then an error (a killed or failed run)."""

    def __init__(self, n: int):
        self.inner, self.n, self.count = make_policy("mutate:cpp"), n, 0

    def act(self, observation, info):
        self.count += 1
        if self.count >= self.n:
            raise RuntimeError("endpoint went away")
        return self.inner.act(observation, info)


@pytest.mark.slow
def test_map_elites_tunes_and_resumes_where_it_stopped(env_factory, tmp_path):
    log = tmp_path / "trajectories.jsonl"
    # ReLU exposes one parameter (the OpenMP schedule, 5 values): room for many duplicate replies.
    config = map_elites.MapElitesConfig(
        tune_trials=1, seed=1, max_proposals_factor=12
    )  # state: next to the log
    env = env_factory(max_turns=4, trajectory_path=str(log))
    with pytest.raises(RuntimeError):
        map_elites.run_episode(env, _CrashAt(2), RELU, config)  # the seed, one tuning trial, then the crash
    path = tmp_path / "search" / "map_elites" / "bundled_L1_1_ReLU__0.json"
    before = load_state(path)
    assert (
        before.calls == 2 and not before.finished and [n.operator for n in before.nodes] == ["seed", "tune"]
    )
    assert _judged_lines(log) == 2
    record = map_elites.run_episode(
        env_factory(max_turns=4, trajectory_path=str(log)), make_policy("mutate:cpp"), RELU, config
    )
    after = load_state(path)
    assert after.calls == 4 and after.finished and _judged_lines(log) == 4  # two new calls, none repeated
    assert [n.source_hash for n in after.nodes[:2]] == [n.source_hash for n in before.nodes]
    assert len(record.turns) == 4 and record.speedup >= before.nodes[0].speedup
    assert after.extra["archive"] and len(after.extra["tuning"]) >= 1
    # A finished search is returned as it is.
    again = map_elites.run_episode(
        env_factory(max_turns=4, trajectory_path=str(log)), make_policy("mutate:cpp"), RELU, config
    )
    assert _judged_lines(log) == 4 and len(again.turns) == 4


@pytest.mark.slow
def test_bench_runs_a_search_baseline_and_draws_it(tmp_path):
    from kernelgym.agents.bench import BenchConfig, run_bench

    out = tmp_path / "bench"
    outcome = run_bench(
        BenchConfig(
            policy="mutate:cpp",
            baseline="evolve",
            tasks="L1/1_ReLU",
            turns=2,
            out=str(out),
            baseline_options={"skills": 0},
            eval_options=dict(QUICK_JUDGE),
            tensorboard=False,
        ),
        progress=False,
    )
    assert outcome.ran == 1 and outcome.records[0]["correct"] and len(outcome.records[0]["turns"]) == 2
    report = (out / "report.md").read_text()
    assert "## Search" in report and "search/evolve/bundled_L1_1_ReLU__0.png" in report
    assert (out / "search" / "best_vs_calls.png").exists()
