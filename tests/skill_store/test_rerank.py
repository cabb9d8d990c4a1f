"""LLM rerank through the Policy protocol, with a scripted policy; the BM25 fallback."""

import pytest

from kernelgym.skill_store import SkillStore
from kernelgym.skill_store.rerank import RerankConfig, parse_ranked_ids, rerank
from kernelgym.skill_store.retrieval import Retriever


class ScriptedPolicy:
    """Stands in for an LLM policy: returns a fixed reply and remembers what it was asked."""

    def __init__(self, reply=None, error=None):
        self.reply, self.error, self.calls = reply, error, []

    def act(self, observation, info):
        self.calls.append((observation, info))
        if self.error:
            raise self.error
        return self.reply


@pytest.fixture(scope="module")
def retriever(tmp_path_factory):
    return Retriever.from_store(SkillStore(tmp_path_factory.mktemp("db") / "s.sqlite"))


QUERY = "softmax over the rows of a matrix after a matmul"


def test_json_reply_reorders_the_candidates(retriever):
    bm25 = [h.id for h in retriever.search(QUERY, backend="cuda", k=10)]
    wanted = [bm25[3], bm25[0], "not-a-skill", bm25[5]]
    policy = ScriptedPolicy(f"Here you go:\n```json\n{wanted!r}\n```".replace("'", '"'))
    hits = retriever.search(QUERY, backend="cuda", k=5, policy=policy)
    assert [h.id for h in hits] == [bm25[3], bm25[0], bm25[5], bm25[1], bm25[2]]
    observation, info = policy.calls[0]
    assert "prompt" in observation and all(i in observation["prompt"] for i in bm25)
    assert info["candidates"] == bm25


def test_free_text_reply_is_parsed_in_order_of_mention():
    known = ["online-softmax", "epilogue-fusion", "cuda-warp-shuffle-reduction"]
    reply = (
        "1. cuda-warp-shuffle-reduction, for the row max\n2. online-softmax\nepilogue-fusion is less useful"
    )
    assert parse_ranked_ids(reply, known) == [
        "cuda-warp-shuffle-reduction",
        "online-softmax",
        "epilogue-fusion",
    ]
    assert parse_ranked_ids('["online-softmax", 3, "online-softmax"]', known) == ["online-softmax"]
    assert parse_ranked_ids("none of these apply", known) == []


@pytest.mark.parametrize(
    "policy, reason",
    [
        (None, "no reranker"),
        (ScriptedPolicy("I am not sure."), "named no candidate"),
        (ScriptedPolicy('["made-up-id"]'), "named no candidate"),
        (ScriptedPolicy(error=TimeoutError("LLM timed out")), "reranker failed"),
        (ScriptedPolicy(reply=None), "not text"),
    ],
)
def test_unusable_reranker_falls_back_to_bm25(retriever, policy, reason):
    bm25 = retriever.search(QUERY, backend="triton", k=10)
    result = rerank(QUERY, bm25, policy, k=5, config=RerankConfig(candidates=10))
    assert not result.used_llm and reason in result.reason
    assert [h.id for h in result.hits] == [h.id for h in bm25[:5]]
    assert [h.id for h in retriever.search(QUERY, backend="triton", k=5, policy=policy)] == [
        h.id for h in bm25[:5]
    ]
