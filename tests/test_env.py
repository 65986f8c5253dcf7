"""RewardEnv: parse -> one batched search -> fuse -> reward, with TRL's signature."""
from __future__ import annotations

import math

import pytest

from qrlib.generation import prompts
from qrlib.rl import rewards
from qrlib.rl.env import RewardEnv
from qrlib.core.errors import QrlibError
from qrlib.generation.parsing import formats, parse_completion

QRELS = {"q1": {"g1": 1, "g2": 1}, "q2": {"h": 1}}
DOCS = {"alpha": [("g1", 3.0), ("x", 2.0), ("g2", 1.0)],
        "beta": [("g2", 5.0), ("x", 1.0)],
        "orig": [("x", 9.0), ("y", 8.0)]}


class FakeRetriever:
    def __init__(self):
        self.calls = []

    def search(self, texts, k):
        self.calls.append((list(texts), k))
        out = []
        for t in texts:
            key = t.split()[-1]
            out.append(DOCS.get(key, [("y", 1.0)])[:k])
        return out


def test_trl_signature_one_batched_search_and_records():
    ret = FakeRetriever()
    env = RewardEnv(ret, QRELS, reward="acqo_stage2", fmt="acqo", eta=0.6, k_star=0)
    assert env.__name__ == "acqo_stage2"
    comps = ['{"query": "alpha%%beta"}', '{"query": "alpha"}', "junk",
             [{"role": "assistant", "content": '{"query": "beta"}'}]]
    out = env(prompts=["p"] * 4, completions=comps, qid=["q1"] * 4)
    assert len(ret.calls) == 1                                    # ONE search call
    assert ret.calls[0][0] == ["alpha", "beta"]                   # duplicates searched once
    assert ret.calls[0][1] == 100                                 # ACQO depth reaches rank 100
    # rollout 0: RSF of alpha+beta: g2 P=1/(1/3+1)=.75 -> 1st, g1 P=1 S=3 -> 2nd
    assert out[0] == pytest.approx(0.6 * 2 + 0.36 * (2 - 1 / 9))
    assert out[1] == pytest.approx(0.6 * 2 + 0.36 * (2 - 2 / 9))  # gold at ranks 1, 3
    assert out[2] == -1.0                                         # delta, format failed
    assert out[3] == pytest.approx(0.6 * 2)
    recs = env.records
    assert [r["gold_ranks"] for r in recs] == [[1, 2], [1, 3], [], [1]]
    assert recs[0]["queries"] == ["alpha", "beta"] and recs[2]["format_ok"] is False
    assert recs[2]["error"] and "part_format" in recs[0]
    assert len(env.records_frame()) == 4


def test_expand_mode_and_lenient():
    ret = FakeRetriever()
    env = RewardEnv(ret, QRELS, reward="deepretrieval_ndcg", fmt="deepretrieval", k=10,
                    mode="expand", lenient=True, queries={"q1": "what is"})
    out = env(None, ['<think>t</think><answer>{"query": "alpha"</answer>'], qid=["q1"])
    assert ret.calls[0][0] == ["what is alpha"]
    assert out == [-1.0]                      # recovered query searched, format still failed
    assert env.records[0]["recovered"] and env.records[0]["gold_ranks"] == [1, 3]
    env2 = RewardEnv(FakeRetriever(), QRELS, reward="deepretrieval_ndcg", k=10,
                     lenient=True, gate=False, format_penalty=-0.5)
    out = env2(None, ['<think>t</think><answer>{"query": "alpha"</answer>'], qid=["q1"])
    ndcg = (1 + 1 / 2) / (1 + 1 / math.log2(3))
    assert out[0] == pytest.approx(ndcg - 0.5)


def test_query_column_and_copy_penalty():
    env = RewardEnv(FakeRetriever(), QRELS, reward="ndcg", fmt="plain", k=10,
                    copy_penalty=0.05)
    out = env(None, ["beta", "orig"], qid=["q1", "q1"], query=["orig", "orig"])
    assert out[0] == pytest.approx(1 / (1 + 1 / math.log2(3)))
    assert out[1] == pytest.approx(0.0 - 0.05)


def test_copy_penalty_in_expand_mode_compares_the_models_own_text():
    # SAGE Eq. 3: the model copied the query verbatim; in expand mode the searched text is
    # "orig orig", which never equals "orig", but the rollout is still a copy
    for mode in ("rewrite", "expand"):
        env = RewardEnv(FakeRetriever(), QRELS, reward="sage_direct", fmt="sage", k=10,
                        p=0.05, mode=mode)
        out = env(None, ['{"query": "orig", "strategy": 1}', '{"query": "beta", "strategy": 1}'],
                  qid=["q1", "q1"], query=["orig", "orig"])
        assert out[0] == pytest.approx(-0.05), mode
        assert env.records[0]["part_copy"] == 1.0 and env.records[1]["part_copy"] == 0.0
    env = RewardEnv(FakeRetriever(), QRELS, reward="ndcg", fmt="plain", k=10, mode="expand",
                    copy_penalty=0.05)
    out = env(None, ["orig"], qid=["q1"], query=["orig"])
    assert out == [pytest.approx(-0.05)]


def test_group_rewards_group_by_qid_and_consecutive():
    comps = ['{"query": "alpha", "strategy": 1}', '{"query": "beta", "strategy": 2}',
             '{"query": "orig", "strategy": 1}', '{"query": "orig", "strategy": 3}']
    env = RewardEnv(FakeRetriever(), QRELS, reward="sage_crs", fmt="sage", k=10, p=0.0)
    out = env(None, comps, qid=["q1", "q2", "q1", "q2"])
    # q1 group: ndcg(alpha) and 0 -> median is their mean; q2 group: both 0
    n_alpha = (1 + 1 / 2) / (1 + 1 / math.log2(3))
    assert out == pytest.approx([n_alpha / 2, 0.0, -n_alpha / 2, 0.0])
    env = RewardEnv(FakeRetriever(), QRELS, reward="sage_crs", fmt="sage", k=10, p=0.0,
                    group_by="consecutive", num_generations=2)
    out = env(None, comps, qid=["q1", "q1", "q1", "q1"])
    n_beta = 1 / (1 + 1 / math.log2(3))
    assert out == pytest.approx([(n_alpha - n_beta) / 2, (n_beta - n_alpha) / 2, 0, 0])


def test_default_depths():
    assert RewardEnv(FakeRetriever(), QRELS, reward="ndcg").depth == 10
    assert RewardEnv(FakeRetriever(), QRELS, reward="deepretrieval_recall").depth == 3000
    assert RewardEnv(FakeRetriever(), QRELS, reward="deepretrieval_ndcg",
                     preset="released").depth == 1000
    assert RewardEnv(FakeRetriever(), QRELS, reward="acqo_stage2", k=20).depth == 20
    assert RewardEnv(FakeRetriever(), QRELS, reward="acqo_stage1", fmt="acqo").depth == 100
    assert RewardEnv(FakeRetriever(), QRELS, reward="deepretrieval_answer_rank").depth == 3000
    assert RewardEnv(FakeRetriever(), QRELS, reward="ndcg", depth=50).depth == 50


def test_bad_inputs():
    with pytest.raises(QrlibError):
        RewardEnv(FakeRetriever(), QRELS, reward="nope")
    with pytest.raises(QrlibError):
        RewardEnv(FakeRetriever(), QRELS, mode="append")
    with pytest.raises(QrlibError):
        RewardEnv(FakeRetriever(), QRELS, reward="ndcg", fmt="yaml")
    env = RewardEnv(FakeRetriever(), QRELS, reward="ndcg", fmt="plain")
    with pytest.raises(QrlibError):
        env(None, ["a"])                                   # no qid column
    with pytest.raises(QrlibError):
        env(None, ["a"], qid=["unknown"])


def test_presets_through_the_environment():
    env = RewardEnv(FakeRetriever(), QRELS, reward="deepretrieval_ndcg", preset="released")
    out = env(None, ['<think>t</think><answer>{"query": "orig"}</answer>',
                     '<think>t</think><answer>{"query": "beta"}</answer>', "junk"],
              qid=["q1"] * 3)
    nd_beta = 1 / (1 + 1 / math.log2(3))
    assert out == pytest.approx([0.0, 0.1 + nd_beta, -2.0])
    with pytest.raises(QrlibError, match="no preset"):
        RewardEnv(FakeRetriever(), QRELS, reward="sage_crs", fmt="sage", preset="released")


def test_a_reward_declares_depth_columns_and_pre_step():
    """RewardEnv reads depth, columns and the pre-step from the registered spec; it knows
    no reward by name."""
    seen = {}

    def pre(group, state):
        seen["state"] = state
        for o in group:
            o.extras["bonus"] = float(o.row["weight"]) * len(o.generated)

    @rewards.register_reward("_test_weighted", depth=lambda p: 7 * p["m"],
                             columns=("weight", ("gold_a", "gold_b")), prepare=pre,
                             record=("bonus",))
    def _weighted(o, *, m: int = 2) -> dict:
        return {"reward": o.extras["bonus"] + len(o.ranked)}

    try:
        env = RewardEnv(FakeRetriever(), QRELS, reward="_test_weighted", fmt="plain")
        assert env.depth == 14
        out = env(None, ["alpha", "beta"], qid=["q1", "q1"], weight=[2, 3], gold_b=[0, 0])
        assert out == pytest.approx([2 + 3, 3 + 2])
        assert env.records[0]["bonus"] == 2.0 and seen["state"]["sql_timeout_s"] == 2.0
        with pytest.raises(QrlibError, match="weight, gold_a or gold_b"):
            env(None, ["alpha"], qid=["q1"])
        with pytest.raises(QrlibError, match="gold_a or gold_b"):
            env(None, ["alpha"], qid=["q1"], weight=[1])
        with pytest.raises(QrlibError, match="'weight' has 1 values for 2"):
            env(None, ["alpha", "beta"], qid=["q1", "q1"], weight=[1], gold_a=[1, 1])
    finally:
        rewards.REWARDS.pop("_test_weighted", None)


# decomposition prompts of the bandit study: their JSON-list replies feed the bandit
# simulation, never a reward, so they name no completion format
NOT_PARSED = {"bandit/problem-definition", "bandit/specialised"}


def test_every_registered_prompt_declares_a_known_format():
    for name, tpl in prompts.REGISTRY.items():
        fmt = tpl.meta.get("fmt")
        if fmt is None and name in NOT_PARSED:
            continue
        assert fmt in formats(), (name, fmt)
        parse_completion("", fmt)                        # accepted by the parser


def test_sql_reward(tiny_db):
    env = RewardEnv(None, {}, reward="deepretrieval_sql", fmt="deepretrieval-nothink",
                    exec_bonus=0.3)
    comps = ['<answer>{"query": "SELECT a FROM t WHERE b = \'x\' ORDER BY a DESC"}</answer>',
             '<answer>{"query": "SELECT a FROM t WHERE b = \'x\'"}</answer>',
             '<answer>{"query": "SELECT nope FROM t"}</answer>', "no answer"]
    out = env(None, comps, qid=["s"] * 4, db_path=[str(tiny_db)] * 4,
              gold_sql=["SELECT a FROM t WHERE b = 'x' ORDER BY a DESC"] * 4)
    # the gold SQL sorts, so Spider's comparison wants the order too: rollout 2 only ran
    assert out == pytest.approx([1.3, 0.3, 0.0, -1.0])
    assert env.records[2]["sql_error"].startswith("sql error")
    released = RewardEnv(None, {}, reward="deepretrieval_sql", fmt="deepretrieval-nothink",
                         preset="released")                    # sets, as spider.py does
    out = released(None, comps, qid=["s"] * 4, db_path=[str(tiny_db)] * 4,
                   gold_rows=[[(3,), (1,)]] * 4)
    assert out == pytest.approx([1.1, 1.1, 0.0, -2.0])
    assert env.required_columns == ("db_path",)                 # what training checks
    assert env.missing_columns(["qid", "db_path"]) == ["gold_sql or gold_rows"]
    assert RewardEnv(FakeRetriever(), QRELS, reward="ndcg").required_columns == ()
    with pytest.raises(QrlibError, match="db_path"):
        env(None, comps[:1], qid=["s"], gold_sql=["SELECT 1"])
    with pytest.raises(QrlibError, match="gold_sql or gold_rows"):
        env(None, comps[:1], qid=["s"], db_path=[str(tiny_db)])


def test_rlqr_training_parses_as_evaluation_does_when_lenient():
    """Issue 26 item 7: RL-QR was trained with the strict parser (a malformed rollout found
    no query, so nothing was searched) and evaluated with the lenient one. With
    ``lenient=True`` the env searches exactly what evaluation would search, and the format
    still costs through the penalty."""
    from qrlib.generation.parsing import parse_completion

    comps = ["<answer>alpha</answer> and some chatter", "<answer>alpha</answer><answer>beta</answer>",
             "alpha</answer>", "<answer>alpha</answer>"]
    ret = FakeRetriever()
    env = RewardEnv(ret, QRELS, reward="rlqr", fmt="plain", k=3, lenient=True)
    out = env(None, comps, qid=["q1"] * 4)
    evaluated = [parse_completion(c, "plain", lenient=True).queries for c in comps]
    assert [r["queries"] for r in env.records] == evaluated
    assert {t for texts, _ in ret.calls for t in texts} == {q[0] for q in evaluated}
    strict = RewardEnv(FakeRetriever(), QRELS, reward="rlqr", fmt="plain", k=3)
    assert sum(strict(None, comps, qid=["q1"] * 4)) < sum(out)
    assert out[3] > out[0] and out[3] > out[2]   # same query: the malformed ones pay the penalty
