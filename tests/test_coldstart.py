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
    # other rows: the SFT is redone
    rl_after_sft(_cfg(tmp_path), env=env, rows=ROWS[:1])
    assert "reused" not in capsys.readouterr().out


def test_needs_sft_steps_and_no_init_adapter(tmp_path):
    with pytest.raises(QrlibError, match="sft_steps > 0"):
        rl_after_sft(_cfg(tmp_path, sft_steps=0), env=FakeEnv(), rows=ROWS)
    with pytest.raises(QrlibError, match="init_adapter"):
        rl_after_sft(_cfg(tmp_path, init_adapter=str(tmp_path)), env=FakeEnv(), rows=ROWS)
