"""One decoding contract per run (issue 41 item 1): training writes it beside the adapter,
test decoding reads it and refuses settings that differ."""
from __future__ import annotations

import pytest

from qrlib.core.errors import QrlibError
from qrlib.generation import policy, rewrite
from qrlib.generation.contract import DecodingContract
from qrlib.rl import train as T


def _cfg(**kw):
    return T.load_config({"prompt": "deepretrieval/bm25-nothink", "prefill": '{"query": "',
                          "stop": ['"}'], "max_completion_length": 64, **kw})


def test_contract_of_a_run_round_trips(tmp_path):
    c = DecodingContract.of(_cfg())
    assert (c.prefill, c.stop, c.max_new_tokens) == ('{"query": "', ('"}',), 64)
    assert c.fmt == _cfg().completion_format
    c.save(tmp_path)
    assert DecodingContract.load(tmp_path) == c
    with pytest.raises(QrlibError, match="decoding.json is missing"):
        DecodingContract.load(tmp_path / "elsewhere")
    (tmp_path / "decoding.json").write_text('{"prompt": "x", "temperature": 1}')
    with pytest.raises(QrlibError, match=r"unknown field\(s\) \['temperature'\]"):
        DecodingContract.load(tmp_path)
    with pytest.raises(QrlibError, match="max_new_tokens must be an integer >= 1"):
        DecodingContract(prompt="p", max_new_tokens=0)


def test_test_decoding_follows_the_contract_and_refuses_to_differ(tmp_path, monkeypatch):
    seen = {}

    def fake_generate(model, tok, texts, **kw):
        seen.update(kw, n=len(texts), first=texts[0])
        return ['vitamin d"}'] * len(texts)

    monkeypatch.setattr(policy, "generate", fake_generate)
    monkeypatch.setattr(rewrite, "render_prompt",
                        lambda prompt, tok, query, prefill: f"<{prompt}>{query}|{prefill}")

    class Tok:
        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": text.split()}

    DecodingContract.of(_cfg()).save(tmp_path)
    df = rewrite.rewrite_queries(None, Tok(), {"q1": "vitamin d and bones"}, contract=tmp_path,
                                 progress=False)
    assert seen["max_new_tokens"] == 64 and seen["stop"] == ['"}']
    assert seen["first"].endswith('|{"query": "')  # the training prefill
    assert df.rewrite.tolist() == ["vitamin d"]  # parsed (leniently) with the run's format
    # an explicit setting equal to the contract is fine; one that differs is refused
    rewrite.rewrite_queries(None, Tok(), {"q1": "x"}, contract=tmp_path, max_new_tokens=64,
                            progress=False)
    with pytest.raises(QrlibError, match=r"max_new_tokens 24 \(trained with 64\); stop"):
        rewrite.rewrite_queries(None, Tok(), {"q1": "x"}, contract=tmp_path,
                                max_new_tokens=24, stop=[], progress=False)
    with pytest.raises(QrlibError, match="needs a prompt or a contract"):
        rewrite.rewrite_queries(None, Tok(), {"q1": "x"}, progress=False)
