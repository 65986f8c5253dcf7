"""qrlib.rl.coldstart: the SFT cold start as its own checkpointed step, then GRPO from its
adapter; the SFT is reused when nothing changed and redone when the rows change."""
from __future__ import annotations

import json

import pytest

from qrlib.core.errors import QrlibError
from qrlib.rl import train as T
from qrlib.rl.coldstart import rl_after_sft
from test_train import FakeEnv

ROWS = [{"qid": "1", "query": "vitamin d bone"}, {"qid": "2", "query": "aspirin heart"}]


def _cfg(tmp_path, **kw):
    return T.load_config({"name": "cold", "run_dir": str(tmp_path), "model": "smollm2",
                          "fmt": "deepretrieval-nothink", "prefill": '<answer>{"query": "',
                          "prompt": {"user": "Query for: {query}"}, "max_steps": 1,
                          "num_generations": 2, "max_completion_length": 6, "sft_steps": 2,
                          "save_steps": 1, **kw})


def test_sft_then_grpo_from_its_adapter_and_reuse(tmp_path, capsys):
    env = FakeEnv()
    s = rl_after_sft(_cfg(tmp_path), env=env, rows=ROWS)
    sft_dir = tmp_path / "rl" / "cold-sft" / "sft" / "adapter"
    assert s["steps"] == 1 and s["sft_steps"] == 2 and s["sft_adapter"] == str(sft_dir)
    assert (sft_dir / "adapter_config.json").exists()
    saved = json.loads((tmp_path / "rl" / "cold" / "config.json").read_text())
    assert saved["init_adapter"] == str(sft_dir) and saved["sft_steps"] == 0
    assert s["shared_prompt_passes"] >= 1  # the GRPO run itself stays uncheckpointed
    assert len(env.records) == 2
    # same settings: the SFT is reused (and the finished GRPO run too)
    capsys.readouterr()
    rl_after_sft(_cfg(tmp_path), env=env, rows=ROWS)
    assert "reused" in capsys.readouterr().out
    # other rows redo the SFT: test_sft_reuse_key_is_the_whole_config (without a model)


def test_needs_sft_steps_and_no_init_adapter(tmp_path):
    with pytest.raises(QrlibError, match="sft_steps > 0"):
        rl_after_sft(_cfg(tmp_path, sft_steps=0), env=FakeEnv(), rows=ROWS)
    with pytest.raises(QrlibError, match="init_adapter"):
        rl_after_sft(_cfg(tmp_path, init_adapter=str(tmp_path)), env=FakeEnv(), rows=ROWS)


def test_sft_reuse_key_is_the_whole_config(tmp_path, monkeypatch):
    """Any field but the RL run's length and checkpoints (issue 41 item 8) makes the SFT
    cold start train again; one LoraConfig serves SFT and RL."""
    from qrlib.generation import policy
    from qrlib.rl import coldstart, sft

    trained = []

    def fake_sft(cfg, model, tok, rows, peft_config):
        out = cfg.output_dir / "sft" / "adapter"
        out.mkdir(parents=True, exist_ok=True)
        (out / "adapter_config.json").write_text("{}")
        trained.append(peft_config)

    monkeypatch.setattr(policy, "load_policy", lambda *a, **k: (None, None))
    monkeypatch.setattr(sft, "sft_warm_start", fake_sft)
    coldstart.sft_adapter(_cfg(tmp_path), ROWS)
    coldstart.sft_adapter(_cfg(tmp_path, max_steps=50, save_steps=5), ROWS)
    assert len(trained) == 1  # the RL run's length does not touch the SFT
    coldstart.sft_adapter(_cfg(tmp_path, temperature=0.6), ROWS)
    coldstart.sft_adapter(_cfg(tmp_path, temperature=0.6, max_completion_length=64), ROWS)
    assert len(trained) == 3  # fields the old key left out now count
    coldstart.sft_adapter(_cfg(tmp_path, temperature=0.6, max_completion_length=64), ROWS[:1])
    assert len(trained) == 4  # other rows: the SFT is redone
    assert trained[0].r == _cfg(tmp_path).lora_config().r == 16
    assert trained[0].target_modules == _cfg(tmp_path).lora_config().target_modules
