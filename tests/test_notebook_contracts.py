"""Every notebook decodes its test with the decoding contract of its training (issue 41
item 1): the prompt, prefill, stop strings, token budget and parser come from the run, never
from a notebook's own test setting.

Two halves. The decoders refuse a setting that differs from the contract they are given
(tests/test_contract.py for ``rewrite_queries``; here ACQO's and the SQL task's decoders).
And a static check over every notebook that trains: each greedy decoding call passes a
contract (or goes through a wrapper that reads the adapter's), and no notebook declares a
test-only budget. The check is a function, tested on a notebook that breaks it."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from qrlib.core.errors import QrlibError
from qrlib.generation import policy
from qrlib.generation.contract import DecodingContract
from qrlib.workbook.profiles import NOTEBOOK_SRC_DIR, notebook_names

QRLIB_DIR = Path(__file__).resolve().parents[1] / "qrlib"

TRAINS = re.compile(r"\b(train|rl_after_sft|train_variant|train_rewriter|sft_adapter|train_runs|"
                    r"train_all)\(")
DECODERS = {"rewrite_queries", "generate_decompositions", "generate_sql"}
WRAPPERS = {"decompose", "rewrite_and_score", "evaluate", "rewrite_test"}  # read contracts
SETTINGS = {"prompt", "prefill", "max_new_tokens", "stop", "fmt"}
TEST_ONLY = re.compile(r"^(eval_max_new_tokens|eval_think_max_new_tokens|eval_stop|"
                       r"eval_prefill)\s*=", re.M)


def contract_problems(source: str) -> list[str]:
    """Why a notebook's test decoding could differ from its training (empty: it cannot)."""
    if not TRAINS.search(source):
        return []
    problems = [f"declares a test-only setting {m.group(1)}" for m in TEST_ONLY.finditer(source)]
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
        kws = {k.arg: k.value for k in node.keywords}
        sampled = isinstance(kws.get("do_sample"), ast.Constant) and kws["do_sample"].value
        if name in DECODERS and not sampled and "contract" not in kws:
            problems.append(f"line {node.lineno}: {name}(...) decodes without contract=")
        if name in DECODERS | WRAPPERS and "contract" in kws and SETTINGS & set(kws):
            problems.append(f"line {node.lineno}: {name}(...) passes "
                            f"{sorted(SETTINGS & set(kws))} beside its contract")
        if name in WRAPPERS and "max_new_tokens" in kws:
            problems.append(f"line {node.lineno}: {name}(...) sets its own max_new_tokens")
    return problems


@pytest.mark.parametrize("name", notebook_names())
def test_every_trained_notebook_decodes_its_test_with_the_training_contract(name):
    source = (NOTEBOOK_SRC_DIR / f"{name}.py").read_text(encoding="utf-8")
    assert contract_problems(source) == []


METHOD_MODULES = sorted(str(p.relative_to(QRLIB_DIR)) for p in (QRLIB_DIR / "methods").rglob("*.py"))


@pytest.mark.parametrize("module", METHOD_MODULES)
def test_every_paper_module_that_trains_decodes_with_the_contract(module):
    """The notebooks' pipelines live in the paper folders (``study.py`` and the like): the
    same check holds there."""
    assert contract_problems((QRLIB_DIR / module).read_text(encoding="utf-8")) == []


def test_the_check_fails_on_a_notebook_whose_test_decodes_otherwise():
    bad = ("eval_max_new_tokens = 24\n"
           "s = train(cfg, env=env)\n"
           "df = rewrite.rewrite_queries(m, tok, qs, prompt, max_new_tokens=eval_max_new_tokens)\n"
           "d = decompose(model, a, TEST, max_new_tokens=24)\n"
           "g = generate_sql(m, tok, rows, contract=a, prefill='<answer>')\n"
           "r = generate_decompositions(m, tok, rows, contract=a, n=4, do_sample=True)\n")
    found = contract_problems(bad)
    assert len(found) == 4, found
    assert "test-only setting eval_max_new_tokens" in found[0]
    assert not contract_problems(bad.replace("train(", "score("))  # nothing trained


class Tok:
    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": text.split()}


def test_acqo_and_sql_decoders_follow_the_contract_and_refuse_to_differ(tmp_path, monkeypatch):
    from qrlib.methods.acqo import curriculum
    from qrlib.methods.deepretrieval import sql_task

    seen = {}

    def fake_generate(model, tok, texts, **kw):
        seen.update(kw, first=texts[0])
        return ['a", "b"]}'] * len(texts) * kw.get("num_return_sequences", 1)

    monkeypatch.setattr(policy, "generate", fake_generate)
    monkeypatch.setattr(curriculum, "render_prompt", lambda t, tok, prefill, **v: f"P|{prefill}")
    c = DecodingContract(prompt="acqo/decompose", prefill='<answer>{"queries": ["',
                         stop=('"]}',), max_new_tokens=72, fmt="acqo")
    c.save(tmp_path)
    rows = [{"qid": "1", "question": "who?", "context": ""}]
    out = curriculum.generate_decompositions(None, Tok(), rows, contract=tmp_path,
                                             progress=False)
    assert (seen["max_new_tokens"], seen["stop"]) == (72, ['"]}'])
    assert seen["first"] == 'P|<answer>{"queries": ["' and out[0]["subqueries"]
    with pytest.raises(QrlibError, match=r"max_new_tokens 24 \(trained with 72\)"):
        curriculum.generate_decompositions(None, Tok(), rows, contract=tmp_path,
                                           max_new_tokens=24, progress=False)
    with pytest.raises(QrlibError, match="needs a prompt or a contract"):
        curriculum.generate_decompositions(None, Tok(), rows, progress=False)

    monkeypatch.setattr(sql_task, "render_prompt", lambda t, tok, prefill, **v: f"S|{prefill}")
    sc = DecodingContract(prompt="deepretrieval/sql-nothink",
                          prefill='<answer>{"query": "SELECT', stop=("</answer>",),
                          max_new_tokens=96, fmt="deepretrieval-nothink")
    srows = [{"qid": "1", "db_id": "d", "schema": "t(a)", "question": "q", "sql": "x",
              "db_path": "x"}]
    monkeypatch.setattr(sql_task, "_check_rows", lambda rows: None)
    sql_task.generate_sql(None, Tok(), srows, contract=sc)
    assert (seen["max_new_tokens"], seen["stop"]) == (96, ["</answer>"])
    assert seen["first"] == 'S|<answer>{"query": "SELECT'
    with pytest.raises(QrlibError, match=r"prefill '' \(trained with"):
        sql_task.generate_sql(None, Tok(), srows, contract=sc, prefill="")
