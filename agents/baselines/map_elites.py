"""KernelFoundry-style MAP-Elites: a quality-diversity archive of kernels, meta-prompts evolved with them,
and template parameter tuning with Optuna.

- Archive: one elite per behaviour cell, the cell read from the judge's result (memory- or compute-bound,
  roofline fraction in quarters, the number of the solution's own kernel launches, log2 of its largest
  block/tile constant; search.descriptor). A correct candidate enters an empty cell or replaces a worse
  elite (by fitness = verified speedup, ties by measured speedup).
- Step: pick an elite uniformly at random (before any is correct: the latest candidate, to repair it),
  pick an instruction (a meta-prompt) by a tournament on the mean score of the kernels it produced, and
  ask the policy to rewrite the elite following it (`info["instructions"]` carries it for programmatic
  policies).
- Meta-prompt co-evolution: every `meta_every` replies a new instruction is made from the best one (the
  policy rewrites it when it can, `role="meta_prompt"`; otherwise a sentence of another instruction is
  crossed in), and when the population is over `prompts` the worst used one dies.
- Template tuning: when the best elite exposes parameters (templates.py) and was not tuned yet, an Optuna
  study spends up to `tune_trials` judge calls on it (tuning.py); the trials enter the archive like any
  candidate.
Budget, deduplication, checkpoint/resume and the saved graph: kernelgym.agents.baselines.search.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any

from kernelgym.agents.baselines.common import EpisodeRecord, policy_info, start
from kernelgym.agents.baselines.search import Node, Search, rewrite_prompt
from kernelgym.agents.policies.scripted import fence

NAME = "map_elites"

INSTRUCTIONS = (
    (
        "Tile and block the loops so each block's working set stays in cache or shared memory; choose block "
        "sizes that fit this problem size."
    ),
    (
        "Balance the parallel work: change how iterations are split across threads (the OpenMP schedule) or "
        "programs (the grid), so no core or SM idles."
    ),
    "Unroll and vectorize the innermost loops and keep the accumulators in registers.",
    "Cut memory traffic: fuse the steps into one pass, read each input once and write no temporaries.",
)


@dataclass
class MapElitesConfig:
    budget: int | None = None  # judge calls; None: the environment's max_turns (and at most that)
    seeds: int = 1  # first candidates written from the task statement alone
    prompts: int = 4  # size of the meta-prompt population
    meta_every: int = 3  # a new meta-prompt after this many replies
    tune_trials: int = 3  # judge calls per tuning session (0: no template tuning)
    tune_max_params: int = 4
    seed: int = 0
    patience: int | None = None
    max_code_chars: int = 12_000
    max_proposals_factor: float = 4.0
    state_dir: str | None = None  # None: <bench out>/search (next to the trajectory log)


# archive ----------------------------------------------------------------------------------------------------


def cell_key(node: Node) -> str:
    d = node.descriptor
    return f"{d.get('bound')}|r{d.get('roofline_bin')}|k{d.get('kernels')}|t{d.get('tile_log2')}"


def insert(archive: dict[str, int], nodes: list[Node], node: Node) -> bool:
    """Put a correct `node` in its cell if the cell is empty or holds a worse elite; True when it went in."""
    if not node.correct:
        return False
    key = cell_key(node)
    here = archive.get(key)
    if here is None or node.rank > nodes[here].rank:
        archive[key] = node.id
        return True
    return False


# meta-prompts -----------------------------------------------------------------------------------------------


def new_prompt(prompts: list[dict[str, Any]], text: str, parent: int | None) -> dict[str, Any]:
    item = {
        "id": len(prompts),
        "text": text.strip(),
        "parent": parent,
        "uses": 0,
        "score_sum": 0.0,
        "alive": True,
    }
    prompts.append(item)
    return item


def mean_score(p: dict[str, Any]) -> float:
    return p["score_sum"] / p["uses"] if p["uses"] else float("inf")  # untried ones first


def pick_prompt(prompts: list[dict[str, Any]], rng: random.Random) -> dict[str, Any]:
    alive = [p for p in prompts if p["alive"]]
    return max(rng.sample(alive, k=min(2, len(alive))), key=mean_score)


def evolve_prompts(prompts: list[dict[str, Any]], size: int, rng: random.Random, rewrite: str = "") -> dict:
    """Add a child of the best instruction (the policy's `rewrite`, else a crossover), then let the worst
    used instruction other than the best die while the population is over `size`. Returns the child."""
    alive = [p for p in prompts if p["alive"]]
    used = [p for p in alive if p["uses"]] or alive
    best = max(used, key=mean_score)
    if rewrite.strip():
        text = rewrite
    else:
        other = rng.choice([p for p in alive if p is not best] or [best])
        sentences = [s.strip() for s in other["text"].split(";") if s.strip()]
        text = f"{best['text'].rstrip('.')}; {rng.choice(sentences).rstrip('.')}."
    child = new_prompt(prompts, text, best["id"])
    while sum(p["alive"] for p in prompts) > size:
        mortal = [p for p in prompts if p["alive"] and p["uses"] and p is not best]
        if not mortal:  # only untried ones and the best: wait until more are tried
            break
        min(mortal, key=mean_score)["alive"] = False
    return child


# the search -------------------------------------------------------------------------------------------------


def _tuning_step(search: Search, config: MapElitesConfig, tuners: dict[str, Any]) -> bool:
    """One tuning trial on the best elite when a session is open or due; False when nothing is to tune."""
    from kernelgym.agents.baselines.tuning import TemplateTuner, TuningConfig, tunable

    state = search.state
    sessions = state.extra.setdefault("tuning", {})
    best = state.best()
    if config.tune_trials <= 0 or best is None:
        return False
    session = sessions.get(best.source_hash)
    if session is None:
        if not tunable(best.source, config.tune_max_params):
            return False
        session = sessions[best.source_hash] = {"node": best.id, "trials": [], "asked": 0}
    if len(session["trials"]) >= config.tune_trials or session["asked"] >= 3 * config.tune_trials:
        return False
    tuner = tuners.get(best.source_hash)
    if tuner is None:
        tuner = tuners[best.source_hash] = TemplateTuner(
            best.source,
            best.score,
            TuningConfig(trials=config.tune_trials, max_params=config.tune_max_params, seed=config.seed),
            history=session["trials"],
        )
    trial, source, values = tuner.ask()
    session["asked"] += 1
    calls = state.calls
    node = search.judge(fence(source), best, "tune", params=values)
    score = node.score if node is not None else 0.0
    tuner.tell(trial, values, score)
    if state.calls > calls:  # judged (a duplicate costs no call and is not a trial of the session)
        session["trials"].append({"params": values, "value": score})
    if node is not None:
        insert(state.extra.setdefault("archive", {}), state.nodes, node)
    search.checkpoint()
    return True


def _choose_parent(state, rng: random.Random, seeds: int) -> Node | None:
    archive = state.extra.setdefault("archive", {})
    if archive:
        return state.nodes[archive[rng.choice(sorted(archive))]]
    judged = [n for n in state.nodes if n.call is not None]
    if sum(n.operator == "seed" for n in judged) < seeds or not judged:
        return None
    return judged[-1]  # nothing correct yet: repair the latest


def _meta_step(policy, obs, info, state, config: MapElitesConfig, rng: random.Random) -> None:
    prompts = state.extra["prompts"]
    best = max([p for p in prompts if p["alive"]], key=mean_score)
    ask = [
        {
            "role": "user",
            "content": "Rewrite this instruction for a kernel-optimizing model so it leads to "
            f"faster kernels; answer with the instruction only, one or two sentences:\n{best['text']}",
        }
    ]
    rewrite = str(
        policy.act({**obs, "messages": ask}, policy_info(info, state.proposals, role="meta_prompt"))
    )
    if "```" in rewrite or len(rewrite) > 600:
        rewrite = ""  # not an instruction
    evolve_prompts(prompts, config.prompts, rng, rewrite)


def _seed_prompts(state, config: MapElitesConfig) -> None:
    """The first population of instructions (kept across a resume)."""
    if "prompts" not in state.extra:
        state.extra["prompts"] = []
        for text in INSTRUCTIONS[: max(1, config.prompts)]:
            new_prompt(state.extra["prompts"], text, None)


def run_episode(
    env,
    policy,
    task_id: str,
    config: MapElitesConfig | None = None,
    *,
    sample: int = 0,
    seed: int | None = None,
) -> EpisodeRecord:
    config = config or MapElitesConfig()
    obs, info, _ = start(env, task_id, seed)
    search = Search.from_config(env, NAME, info.get("task_id", task_id), sample, config)
    state = search.state
    _seed_prompts(state, config)
    tuners: dict[str, Any] = {}
    while not search.should_stop():
        rng = random.Random(config.seed * 1_000_003 + state.proposals)
        if _tuning_step(search, config, tuners):
            continue
        parent = _choose_parent(state, rng, config.seeds)
        prompt = pick_prompt(state.extra["prompts"], rng)
        started = time.monotonic()
        if parent is None:
            messages, extra = [{"role": "user", "content": obs["prompt"]}], {}
        else:
            text = rewrite_prompt(
                obs["prompt"], parent, f"Instructions: {prompt['text']}", config.max_code_chars
            )
            messages, extra = [{"role": "user", "content": text}], {"parent_source": parent.source}
        reply = policy.act(
            {**obs, "messages": messages},
            policy_info(
                info, state.proposals, role="generator", phase=NAME, instructions=prompt["text"], **extra
            ),
        )
        node = search.judge(
            reply,
            parent,
            "seed" if parent is None else "rewrite",
            started=started,
            **({} if parent is None else {"prompt": prompt["id"]}),
        )
        if node is not None and parent is not None:
            prompt["uses"] += 1
            prompt["score_sum"] += node.score
        if node is not None:
            insert(state.extra.setdefault("archive", {}), state.nodes, node)
        if parent is not None and state.proposals % max(1, config.meta_every) == 0:
            _meta_step(policy, obs, info, state, config, random.Random(rng.random()))
        search.checkpoint()
    return search.finish(info)
