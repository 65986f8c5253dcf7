"""DeepRetrieval's database search (Sec. 3.3, Table 3): question + schema -> one SQLite query.

The pipeline notebook 13 calls:

* :func:`generate_sql`: greedy SQL for every Spider row (``qrlib.data.rows.rows_from_spider``)
  through a DeepRetrieval SQL prompt (``deepretrieval/sql-think`` or ``sql-nothink``),
  parsed like the training reward parses it (strict format first, lenient recovery after);
* :func:`score_sql`: runs each statement in the read-only, time-limited sandbox
  (:func:`qrlib.data.sql.execute_sql`) and compares its rows with the gold query's, as
  Spider's execution accuracy does (``compare="spider"``: order matters only when the gold
  query has ORDER BY; :func:`qrlib.methods.deepretrieval.rewards.sql_execution_match`, the
  function the RL reward calls);
* :func:`gold_targets`: SFT targets from the gold SQL in the prompt's answer layout (the
  "SFT on gold" row and the cold start of "RL after SFT");
* :func:`accuracy_by_level`: execution accuracy overall and per Spider hardness level
  (:mod:`qrlib.eval.spider_hardness`).

Generated SQL is hostile input: it only ever runs inside the sandbox (a separate process,
an authorizer that denies every write, ATTACH and PRAGMA, a wall-clock limit).
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import qrlib.methods.registry  # noqa: F401  (prompts and formats)
from qrlib.core.errors import QrlibError
from qrlib.data import sql as sandbox
from qrlib.eval.spider_hardness import LEVELS, hardness
from qrlib.generation import engine, policy
from qrlib.generation.contract import decoding_settings
from qrlib.generation.parsing import parse_completion, sft_target
from qrlib.generation.prompts import as_template, render_prompt
from qrlib.methods.deepretrieval.rewards import sql_execution_match

_COLUMNS = ("schema", "question", "db_id", "db_path", "gold_sql")


def _check_rows(rows: Sequence[Mapping[str, Any]]) -> None:
    if not rows:
        raise QrlibError("no Spider rows (rows_from_spider gave none for this split)")
    missing = [c for c in ("qid", *_COLUMNS) if c not in rows[0]]
    if missing:
        raise QrlibError(f"a Spider row needs {', '.join(missing)} (build rows with "
                         "qrlib.data.rows.rows_from_spider)")


def generate_sql(model: Any, tokenizer: Any, rows: Sequence[Mapping[str, Any]],
                 prompt: str | None = None, *, prefill: str | None = None,
                 max_new_tokens: int | None = None, batch_size: int = 8,
                 autocast: bool | None = False, progress: bool = False,
                 stop: Any = None, contract: Any = None) -> Any:
    """Greedy SQL for each row; one row per question with ``qid, db_id, completion,
    format_ok, sql, think_words, gen_tokens, gen_seconds`` (``sql`` empty when nothing
    parses). ``contract``: a :class:`~qrlib.generation.contract.DecodingContract` or an
    adapter folder, whose prompt, prefill, stop strings, budget and parser are used (an
    explicit argument that differs is an error). Without one, the prompt's ``meta`` gives
    its output format, and its prefill unless ``prefill`` is given; 160 tokens."""
    import pandas as pd

    _check_rows(rows)
    d = decoding_settings(contract, prompt=prompt, prefill=prefill,
                          max_new_tokens=max_new_tokens, stop=stop)
    if d["prompt"] is None:
        raise QrlibError("generate_sql needs a prompt or a contract")
    template = as_template(d["prompt"])
    fmt = d["fmt"] or template.meta.get("fmt", "deepretrieval-nothink")
    prefill = template.meta.get("prefill", "") if d["prefill"] is None else d["prefill"]
    max_new_tokens = d["max_new_tokens"] or 160
    stop = d["stop"] or None
    out_rows = []
    step = engine.chunk_size(batch_size, len(rows))
    starts = range(0, len(rows), step)
    if progress:
        from tqdm.auto import tqdm

        starts = tqdm(starts, desc="sql", unit="batch")
    for s in starts:
        chunk = rows[s:s + step]
        texts = [render_prompt(template, tokenizer, prefill=prefill, schema=r["schema"],
                               question=r["question"]) for r in chunk]
        t0 = time.perf_counter()
        outs = policy.generate(model, tokenizer, texts, max_new_tokens=max_new_tokens,
                               batch_size=batch_size, autocast=autocast, stop=stop)
        per = (time.perf_counter() - t0) / len(chunk)
        for r, out in zip(chunk, outs):
            full = prefill + out
            strict = parse_completion(full, fmt)
            p = strict if strict.ok else parse_completion(full, fmt, lenient=True)
            out_rows.append({
                "qid": r["qid"], "db_id": r["db_id"], "completion": out,
                "format_ok": strict.ok, "sql": p.queries[0] if p.queries else "",
                "think_words": len((p.think or "").split()),
                "gen_tokens": len(tokenizer(out, add_special_tokens=False)["input_ids"]),
                "gen_seconds": per})
    return pd.DataFrame(out_rows)


def score_sql(rows: Sequence[Mapping[str, Any]], generated: Mapping[str, str], *,
              compare: str = "spider", timeout_s: float = 2.0) -> Any:
    """Execution accuracy per question: ``qid, db_id, executed`` (the statement ran),
    ``exec_match`` (its rows equal the gold rows under ``compare``), ``error``. A question
    without a statement counts as not executed. Gold results are computed once per
    (database, query)."""
    import pandas as pd

    _check_rows(rows)
    gold_cache: dict[tuple[str, str], Any] = {}
    out = []
    for r in rows:
        key = (str(r["db_path"]), str(r["gold_sql"]))
        if key not in gold_cache:
            gold_cache[key] = sandbox.execute_sql(r["db_path"], r["gold_sql"], timeout_s=timeout_s)[0]
        sql = (generated.get(r["qid"]) or "").strip()
        pred, err = (sandbox.execute_sql(r["db_path"], sql, timeout_s=timeout_s) if sql
                     else (None, "no statement"))
        match = sql_execution_match(pred, gold_cache[key], mode=compare, gold_sql=r["gold_sql"])
        out.append({"qid": r["qid"], "db_id": r["db_id"], "executed": pred is not None,
                    "exec_match": bool(match), "error": err or ""})
    return pd.DataFrame(out)


def gold_targets(rows: Sequence[Mapping[str, Any]], prompt: str) -> list[dict[str, Any]]:
    """The rows with ``sft_target``: the gold SQL in the prompt's answer layout (a
    no-think prompt; a think prompt has no gold reasoning to imitate). A leading
    ``select`` is written ``SELECT`` (44 of Spider dev's gold queries), so every target
    starts like a ``...SELECT`` prefill."""
    template = as_template(prompt)
    if template.meta.get("prefill"):
        raise QrlibError(f"gold SQL targets need a prompt without reasoning; {template.name} "
                         "prefills " + repr(template.meta["prefill"]))
    fmt = template.meta.get("fmt", "deepretrieval-nothink")
    out = []
    for r in rows:
        gold = r["gold_sql"].strip()
        if gold[:6].lower() == "select":
            gold = "SELECT" + gold[6:]
        out.append({**r, "sft_target": sft_target(gold, fmt)})
    return out


def sample_questions(rows: Sequence[Mapping[str, Any]], n: int | None, *,
                     seed: int = 0) -> list[dict[str, Any]]:
    """``n`` rows drawn without replacement (seeded; all rows, in qid order, for None or
    ``n >= len(rows)``), returned in qid order."""
    import random

    rows = sorted((dict(r) for r in rows), key=lambda r: r["qid"])
    if n is None or n >= len(rows):
        return rows
    if n < 1:
        raise QrlibError(f"n must be a positive number of questions or None, got {n}")
    return sorted(random.Random(seed).sample(rows, n), key=lambda r: r["qid"])


def spider_levels(dev_json: str | os.PathLike) -> dict[str, str]:
    """``spider-<index>`` -> Spider hardness level of each dev.json example (the qids of
    :func:`qrlib.data.rows.rows_from_spider`)."""
    path = Path(dev_json)
    if not path.is_file():
        raise QrlibError(f"Spider examples not found at {path}; pass the dev.json of spider-dev")
    return {f"spider-{i}": hardness(e["sql"])
            for i, e in enumerate(json.loads(path.read_text(encoding="utf-8")))}


def accuracy_by_level(scores: Any, levels: Mapping[str, str]) -> dict[str, float]:
    """Execution accuracy overall (``all``) and per level present, from :func:`score_sql`."""
    lv = scores["qid"].map(levels)
    if lv.isna().any():
        raise QrlibError(f"{int(lv.isna().sum())} scored question(s) have no hardness level")
    out = {"all": float(scores["exec_match"].mean())}
    for level in LEVELS:
        sel = scores[lv == level]
        if len(sel):
            out[level] = float(sel["exec_match"].mean())
    return out
