"""Training health as data (qrlib.rl.health): copy and echo shares per step, and the
collapse verdict of a run's last quarter."""
from __future__ import annotations

import pandas as pd
import pytest

from qrlib.core.errors import QrlibError
from qrlib.generation.parsing import parse_completion
from qrlib.rl import health as H
from qrlib.rl import train as T

THINK = {"system": "", "user": "Answer as <think> your reasoning </think> <answer>"
                               "{{\"query\": \"...\"}}</answer>. Example: <answer>{{\"query\": "
                               "\"vitamin D bone\"}}</answer>\nClaim: {query}"}


def test_template_examples_are_the_prompts_own_placeholders_and_examples():
    ex = H.template_examples(THINK)
    assert ex == {"your reasoning", "...", "vitamin d bone"}  # the input query is not one
    acqo = H.template_examples("acqo/decompose-oneshot")
    assert {"university of oslo founded", "uppsala university founded"} <= acqo
    p = parse_completion("<think> Your reasoning </think><answer>{\"query\": \"x y\"}</answer>",
                         "deepretrieval")
    assert H.echo_of(p, ex)
    q = parse_completion("<think>bones need vitamin d</think><answer>{\"query\": \"x\"}</answer>",
                         "deepretrieval")
    assert not H.echo_of(q, ex) and not H.echo_of(p, frozenset())


def test_timed_reward_logs_copy_and_echo_shares():
    from tests.test_train import FakeEnv

    w = T.TimedReward(FakeEnv(), "deepretrieval-nothink", prefill='<answer>{"query": "',
                      examples=frozenset({"vitamin d bone"}))
    w(["p"] * 4, ['a b"}</answer>', 'Vitamin D  bone"}</answer>', 'c"}</answer>', "oops"],
      qid=["1"] * 4, query=["a b", "x", "y", "z"])
    b = w.batches[-1]
    assert b["copy"] == pytest.approx(1 / 4) and b["echo"] == pytest.approx(1 / 4)
    assert len(w.samples) == 4  # every rollout is kept, not the first few


def test_a_decomposition_that_keeps_the_question_beside_sub_queries_is_not_a_copy():
    """ACQO's outputs: only a decomposition of nothing but the question is a copy (the
    step log once counted every output that led with the question)."""
    from tests.test_train import FakeEnv

    w = T.TimedReward(FakeEnv(), "acqo", prefill='{"query": "')
    q = "Which country Konrad Wolf's father is from?"
    w(["p"] * 4, [f'{q}%%Konrad Wolf%%father"}}', f'{q}"}}', f'{q}%%{q.upper()}"}}',
                  'Konrad Wolf%%father"}'], qid=["1"] * 4, query=[q] * 4)
    b = w.batches[-1]
    assert b["copy"] == pytest.approx(2 / 4) and b["modified"] == pytest.approx(2 / 4)
    from qrlib.rl.steplog import copies_query

    assert copies_query([q, q.lower()], q) and not copies_query([q, "Konrad Wolf"], q)
    assert not copies_query([], q)


def test_health_table_and_the_collapse_verdict():
    log = pd.DataFrame({"step": range(1, 9), "reward": 1.0, "format_valid": 1.0,
                        "truncated": 0.0, "frac_reward_zero_std": 0.5,
                        "copy": [0.1] * 6 + [0.95, 0.97], "echo": 0.0, "kl": 0.01,
                        "entropy": 1.0, "qids": "a"})
    h = H.health_table(log)
    assert list(h.columns) == list(H.HEALTH_COLUMNS) and h.zero_variance.eq(0.5).all()
    c = H.collapse(h)
    assert c["collapsed"] and c["last_quarter_steps"] == 2 and c["copy"] == pytest.approx(0.96)
    assert "COLLAPSED (copy share 0.96 above 0.9" in H.collapse_line("run", h)
    assert not H.collapse(h.assign(copy=0.5))["collapsed"]
    old = log.drop(columns=["copy"]).assign(modified=0.25)  # a log from before 'copy'
    assert H.health_table(old)["copy"].eq(0.75).all()
    with pytest.raises(QrlibError, match="no 'step' column"):
        H.health_table(pd.DataFrame({"x": [1]}))
    with pytest.raises(QrlibError, match="no step"):
        H.collapse(h.iloc[:0])


def test_write_and_read_health(tmp_path):
    run = tmp_path / "r1"
    run.mkdir()
    pd.DataFrame({"step": [1, 2], "reward": [0.1, 0.2], "modified": [1.0, 0.5],
                  "qids": ["a", "b"]}).to_csv(run / "log.csv", index=False)
    assert H.write_health(run).name == "health.csv"
    both = H.read_health([run / "log.csv"])
    assert set(both.run) == {"r1"} and both["copy"].tolist() == [0.0, 0.5]
    with pytest.raises(QrlibError, match="log.csv is missing"):
        H.write_health(tmp_path)


def test_health_summary_and_figure_have_one_entry_per_run():
    import matplotlib

    matplotlib.use("Agg")
    from qrlib import plots

    h = H.health_table(pd.DataFrame({"step": range(1, 5), "reward": 0.5, "copy": 0.95,
                                     "echo": 0.0, "qids": "a"}))
    frame = pd.concat([h.assign(run="a"), h.assign(run="b", copy=0.1)], ignore_index=True)
    s = H.health_summary(frame)
    assert s.run.tolist() == ["a", "b"] and s.collapsed.tolist() == [True, False]
    fig = plots.health_figure(frame)
    assert len(fig.axes) == 4 and len(fig.axes[2].lines) == 5  # 2 runs x copy/echo + 0.9
