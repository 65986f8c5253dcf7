"""Training engine: config presets, reward wrapper, per-step log, tiny GRPO run + resume."""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import pytest

from qrlib import train as T
from qrlib.errors import QrlibError


def test_presets_and_overrides():
    g = T.load_config({"algorithm": "dapo"}).resolved()
    assert (g["loss_type"], g["epsilon_high"], g["beta"]) == ("dapo", 0.28, 0.0)
    g = T.load_config({"algorithm": "grpo", "beta": 0.04, "epsilon": 0.1}).resolved()
    assert (g["loss_type"], g["beta"], g["epsilon"], g["epsilon_high"]) == ("grpo", 0.04, 0.1, None)
    with pytest.raises(QrlibError, match="unknown key 'lr'"):
        T.load_config({"lr": 1})
    with pytest.raises(QrlibError, match="algorithm"):
        T.load_config({"algorithm": "ppo"}).resolved()


class FakeEnv:
    """Reward = number of words of the parsed query; records like RewardEnv's."""

    def __init__(self):
        self.records = []

    def __call__(self, prompts, completions, **cols):
        from qrlib.parsing import parse_completion

        out = []
        for c in completions:
            p = parse_completion(c, "deepretrieval-nothink")
            r = float(len(p.queries[0].split())) if p.ok else -1.0
            self.records.append({"format_ok": p.ok, "part_retrieval": max(r, 0.0), "reward": r,
                                 "call": 7})
            out.append(r)
        return out


def test_timed_reward_prefill_format_and_parts():
    w = T.TimedReward(FakeEnv(), "deepretrieval-nothink", prefill='<answer>{"query": "')
    r = w(["p"] * 3, ['a b"}</answer>', 'a b c"}</answer>', "oops"], qid=["1"] * 3,
          query=["a b", "x", "y"])
    assert r == [2.0, 3.0, -1.0]
    b = w.batches[-1]
    assert b["format_valid"] == pytest.approx(2 / 3)
    assert b["part/retrieval"] == pytest.approx(5 / 3)
    assert "part/call" not in b  # bookkeeping fields are not reward parts
    assert b["qids"] == "1"
    # "a b" copies its query; "a b c" (vs "x") and leniently recovered "oops" (vs "y") differ
    assert b["modified"] == pytest.approx(2 / 3)


def test_prompt_dataset_cycles_queries():
    class Tok:
        def apply_chat_template(self, msgs, tokenize, add_generation_prompt):
            return "|".join(m["content"] for m in msgs)

    ds = T.build_prompts({"a": "qa", "b": "qb"}, Tok(), {"system": "S", "user": "U {query}"},
                         repeat_to=5, prefill="<x>")
    assert len(ds) == 5 and set(ds["qid"]) == {"a", "b"}
    assert all(p.startswith("S|U q") and p.endswith("<x>") for p in ds["prompt"])


@pytest.mark.slow
def test_tiny_cli_run_then_resume(tmp_path):
    cfg = {"name": "tiny", "run_dir": str(tmp_path), "model": "smollm2", "dataset": "scifact",
           "split": "train", "n_queries": 2, "n_distractors": 20, "retriever": "bm25",
           "fmt": "deepretrieval-nothink", "prefill": '<answer>{"query": "',
           "prompt": {"user": "Search query for: {query}"}, "max_steps": 2,
           "num_generations": 2, "max_completion_length": 4, "save_steps": 1,
           "reward_params": {"k": 10, "lenient": True}}
    path = tmp_path / "cfg.yaml"
    path.write_text(json.dumps(cfg))  # JSON is YAML
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "qrlib.train", "--config", str(path)]
    first = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    assert first.returncode == 0, first.stderr[-2000:]
    out = tmp_path / "rl" / "tiny"
    assert (out / "checkpoint-2").is_dir() and (out / "adapter" / "adapter_config.json").exists()
    second = subprocess.run(cmd + ["--set", "max_steps=3"], capture_output=True, text=True,
                            env=env, timeout=900)
    assert second.returncode == 0, second.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["resumed_from"].endswith("checkpoint-2") and summary["steps"] == 3
    with open(out / "log.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [int(r["step"]) for r in rows] == [1, 2, 3]
    for col in ("reward", "reward_std", "frac_reward_zero_std", "format_valid",
                "completion_length", "kl", "step_seconds"):
        assert rows[-1][col] != ""
    assert float(rows[-1]["completion_length"]) <= 4


def test_cli_rejects_bad_key(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("max_step: 3\n")
    res = subprocess.run([sys.executable, "-m", "qrlib.train", "--config", str(path)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 2 and "unknown key 'max_step'" in res.stderr


def test_sft_target_layouts():
    assert T.sft_target("a b", "deepretrieval-nothink") == '<answer>{"query": "a b"}</answer>'
    assert T.sft_target("a b", "plain") == "a b"


@pytest.mark.slow
def test_sft_warm_start_then_one_grpo_step(tmp_path):
    env = FakeEnv()
    cfg = T.load_config({"name": "sft", "run_dir": str(tmp_path), "model": "smollm2",
                         "fmt": "deepretrieval-nothink", "prefill": '<answer>{"query": "',
                         "prompt": {"user": "Query for: {query}"}, "max_steps": 1,
                         "num_generations": 2, "max_completion_length": 6, "sft_steps": 2,
                         "save_steps": 1})
    s = T.train(cfg, env=env, queries={"1": "vitamin d bone", "2": "aspirin heart"})
    assert s["steps"] == 1
    assert (tmp_path / "rl" / "sft" / "adapter" / "adapter_config.json").exists()
    assert len(env.records) == 2
