"""qrlib.methods.acqo.ablation: the checks that keep ACQO's Table 5 rows like for like."""
import json
from types import SimpleNamespace

import pytest

from qrlib.core.errors import QrlibError
from qrlib.methods.acqo.ablation import (check_env, check_same_test, check_swap, load_subqueries,
                                         rerun_config, saved_env, training_collection)
from qrlib.rl.config import load_config

ENV = ("SubqueryProbe(RewardEnv(reward='acqo_stage2', fmt='acqo', mode='rewrite', k=100, "
       "depth=100, fusion='rsf', lenient=True), k=10)")


class _Env:
    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text


def _saved(tmp_path, **extra):
    cfg = {"name": "acqo-stage2-bm25", "run_dir": "../runs/x", "max_steps": 32,
           "init_adapter": "a/stage1", "learning_rate": 5e-5, "rows_fingerprint": "abc",
           "env": ENV, **extra}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    return p


def test_rerun_config_keeps_every_setting_but_name_and_start(tmp_path):
    p = _saved(tmp_path)
    cfg = rerun_config(p, name="acqo-stage2-rrf-stage2-bm25", init_adapter="b/stage1")
    assert cfg["max_steps"] == 32 and cfg["learning_rate"] == 5e-5
    assert cfg["name"] == "acqo-stage2-rrf-stage2-bm25" and cfg["init_adapter"] == "b/stage1"
    assert "env" not in cfg and "rows_fingerprint" not in cfg
    assert load_config(cfg).max_steps == 32  # a valid TrainConfig
    assert saved_env(p) == ENV
    with pytest.raises(QrlibError, match="no saved training config"):
        rerun_config(tmp_path / "missing.json", name="x", init_adapter=None)


def test_check_env_allows_the_fusion_and_nothing_else():
    check_env(_Env(ENV.replace("'rsf'", "'rrf'")), ENV, fusion="rrf")
    with pytest.raises(QrlibError, match="more than the fusion"):
        check_env(_Env(ENV.replace("'rsf'", "'rrf'").replace("k=100", "k=10")), ENV,
                  fusion="rrf")
    with pytest.raises(QrlibError, match="more than the fusion"):
        check_env(_Env(ENV), ENV, fusion="rrf")  # the fusion was not changed
    with pytest.raises(QrlibError, match="names no rsf fusion"):
        check_env(_Env(ENV), ENV.replace("'rsf'", "'combsum'"), fusion="rrf")


def test_check_same_test_fails_on_other_questions_or_scores():
    check_same_test({"a": 0.5, "b": 1.0}, {"a": 0.5, "b": 1.0 + 1e-7}, where="x")
    with pytest.raises(QrlibError, match="3 test questions here, 2"):
        check_same_test({"a": 0.5, "b": 1.0, "c": 0.0}, {"a": 0.5, "b": 1.0}, where="x")
    with pytest.raises(QrlibError, match="differs from 07's by up to 0.1"):
        check_same_test({"a": 0.5, "b": 0.9}, {"a": 0.5, "b": 1.0}, where="x")


def test_load_subqueries_reads_07s_and_12s_layouts(tmp_path):
    p = tmp_path / "d.json"
    p.write_text(json.dumps({"ACQO | 2wiki": [{"qid": "q1", "subqueries": ["a", "b"]}],
                             "2wiki | bm25": [{"qid": "q1", "subqueries": ["c"]}]}))
    assert load_subqueries(p, "ACQO | 2wiki", "notebook 07") == {"q1": ["a", "b"]}
    assert load_subqueries(p, "2wiki | bm25", "notebook 12") == {"q1": ["c"]}
    with pytest.raises(QrlibError, match="no entry 'Stage I | 2wiki'.*rerun notebook 07"):
        load_subqueries(p, "Stage I | 2wiki", "notebook 07")
    with pytest.raises(QrlibError, match="run notebook 12 first"):
        load_subqueries(tmp_path / "none.json", "x", "notebook 12")


def test_training_collection_rebuilds_06s_corpus_or_says_what_is_missing():
    ds = SimpleNamespace(corpus={"d1": {"text": "x"}, "d2": {"text": "y"}, "d3": {"text": "z"}},
                         qrels={"q1": {"d1": 1}, "q2": {"d3": 1}})
    rec = SimpleNamespace(corpus_ids=["d1", "d2"], train_rows=[{"qid": "q1"}],
                          train_datasets=["2wiki"])
    corpus, qrels = training_collection(rec, lambda name: ds)
    assert sorted(corpus) == ["d1", "d2"] and qrels == {"q1": {"d1": 1}}
    rec = SimpleNamespace(corpus_ids=["d1", "d9"], train_rows=[], train_datasets=["2wiki"])
    with pytest.raises(QrlibError, match="1 of its 2 paragraphs are missing from 2wiki"):
        training_collection(rec, lambda name: ds)


def test_check_swap_allows_the_named_field_and_nothing_else():
    stage1 = ENV.replace("acqo_stage2", "acqo_stage1")
    check_swap(_Env(ENV), stage1, field="reward", value="acqo_stage2",
               reference_value="acqo_stage1")
    with pytest.raises(QrlibError, match="in more than the reward"):
        check_swap(_Env(ENV.replace("'rsf'", "'rrf'")), stage1, field="reward",
                   value="acqo_stage2", reference_value="acqo_stage1")
    with pytest.raises(QrlibError, match="names no acqo_stage1 reward"):
        check_swap(_Env(ENV), ENV, field="reward", value="acqo_stage2",
                   reference_value="acqo_stage1")
