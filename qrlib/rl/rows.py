"""The training rows of an RL run and what is built from them: the prompt dataset and the
reward environment.

* :func:`load_rows` -- the rows of the config's row source (:mod:`qrlib.data.rows`) and, for
  a retrieval collection, the (cut) dataset;
* :func:`build_prompts` -- the ``datasets.Dataset`` the trainer samples prompts from;
* :func:`fill_prefill` -- one row's assistant-turn prefill (``{field}`` placeholders filled);
* :func:`build_env` -- the :class:`~qrlib.rl.env.RewardEnv` the config describes;
* :func:`room_filter` and :func:`room_qids` -- the training questions with room to improve
  (a lever row).
"""
from __future__ import annotations

import json
import random
import re
from typing import Any, Mapping, Sequence

from qrlib.core.errors import QrlibError
from qrlib.data import datasets as qdata, rows as qrows
from qrlib.data.rows import check_rows, rows_from_queries
from qrlib.generation.prompts import as_template, render_prompt
from qrlib.retrieval import retrievers as retrieval
from qrlib.rl.config import TrainConfig
from qrlib.rl.env import RewardEnv

__all__ = ["build_prompts", "fill_prefill", "load_rows", "build_env", "room_filter", "room_qids"]


def room_filter(first_ranks: Mapping[str, Any], lo: int = 2, hi: int = 50) -> list[str]:
    """The questions whose raw query ranks its first relevant document at ``lo``..``hi``
    (``first_ranks``: question id -> that rank, None or NaN when not retrieved), in the
    mapping's order. A question solved at rank 1 leaves the rewriter nothing to gain over
    copying it; one whose document is out of reach gives a group without reward spread; the
    ones between are where a rewrite can move the reward (a lever row against a training
    pool where copying is optimal)."""
    import math

    if not (isinstance(lo, int) and isinstance(hi, int) and 1 <= lo <= hi):
        raise QrlibError(f"room_filter needs integers 1 <= lo <= hi, got lo={lo!r}, hi={hi!r}")
    out = []
    for q, r in first_ranks.items():
        if r is None or (isinstance(r, float) and math.isnan(r)):
            continue
        if lo <= int(r) <= hi:
            out.append(str(q))
    return out


def room_qids(queries: Mapping[str, str], qrels: Mapping[str, Mapping[str, int]], searcher: Any,
              *, lo: int = 2, hi: int = 50) -> list[str]:
    """:func:`room_filter` of the ranks at which ``searcher`` puts the first relevant document
    (grade > 0) of each query searched as written, to depth ``hi``; in ``queries``' order."""
    qids = list(queries)
    ranked = searcher.search([queries[q] for q in qids], hi) if qids else []
    first = {q: next((i for i, (doc, _) in enumerate(r, 1) if qrels.get(q, {}).get(doc, 0) > 0),
                     None) for q, r in zip(qids, ranked)}
    return room_filter(first, lo, hi)


def build_prompts(queries: dict[str, str] | Sequence[dict[str, Any]], tokenizer: Any,
                  prompt: str | dict[str, str], *, repeat_to: int | None = None, seed: int = 0,
                  prefill: str = "") -> Any:
    """A ``datasets.Dataset``: one row per training question with a ``prompt`` column (the
    chat-formatted text, ending with ``prefill``) and every column of the rows.

    ``queries`` is a list of rows (:mod:`qrlib.data.rows`; the template's fields are read from
    each row) or, for single-query prompts, a mapping qid -> query text. The rows are
    shuffled with ``seed``; ``repeat_to`` cycles them until there are exactly that many
    (so ``max_steps`` never runs out of data and never gets more).
    """
    from datasets import Dataset

    rows = (rows_from_queries(queries) if isinstance(queries, Mapping)
            else [dict(r) for r in queries])
    template = as_template(prompt)
    check_rows(rows, fields=template.fields)
    rows.sort(key=lambda r: r["qid"])
    random.Random(seed).shuffle(rows)
    out = []
    for r in rows:
        values = {f: r[f] for f in template.fields}
        if "prompt" in r:
            raise QrlibError("training rows may not have a 'prompt' column (it is built here)")
        out.append({"prompt": render_prompt(template, tokenizer,
                                            prefill=fill_prefill(prefill, r), **values), **r})
    if repeat_to and out:
        out = [out[i % len(out)] for i in range(repeat_to)]
    return Dataset.from_list(out)


_FIELD = re.compile(r"\{(\w+)\}")


def fill_prefill(prefill: str, row: Mapping[str, Any]) -> str:
    """The assistant-turn prefill of one row: ``{field}`` placeholders naming a row column
    become that column's value, escaped as JSON string content (prefills open a JSON
    answer, e.g. ``{"query": "{question}%%`` makes the question the first sub-query and
    leaves the model to decide whether and what to add). Other braces stay."""
    if "{" not in prefill:
        return prefill
    return _FIELD.sub(lambda m: (json.dumps(str(row[m.group(1)]), ensure_ascii=False)[1:-1]
                                 if m.group(1) in row else m.group(0)), prefill)


def load_rows(cfg: TrainConfig) -> tuple[list[dict[str, Any]], Any]:
    """Rows of the config's row source and, for retrieval sources, the (cut) dataset."""
    if cfg.rows == "queries":
        ds = qdata.load_dataset(cfg.dataset, cfg.split, data_dir=cfg.data_dir)
        if cfg.n_queries is not None or cfg.n_distractors is not None:
            ds = qdata.subset(ds, n_queries=cfg.n_queries, n_distractors=cfg.n_distractors,
                              seed=cfg.seed)
        return qrows.rows_from_dataset(ds), ds
    if cfg.rows == "spider":
        spider = qdata.load_spider(cfg.data_dir)
        rows = qrows.rows_from_spider(spider, cfg.split, **cfg.row_params)
        if cfg.n_queries is not None and len(rows) > cfg.n_queries:
            rows = random.Random(cfg.seed).sample(rows, cfg.n_queries)
        return rows, None
    if str(cfg.rows).endswith(".jsonl"):
        rows = qrows.read_rows(cfg.rows)
        if cfg.n_queries is not None and len(rows) > cfg.n_queries:
            rows = random.Random(cfg.seed).sample(rows, cfg.n_queries)
        return rows, None
    raise QrlibError(f"rows {cfg.rows!r} unknown; accepted: {list(qrows.SOURCES)} or a "
                     ".jsonl file of rows")


def build_env(cfg: TrainConfig, ds: Any) -> Any:
    """Retriever (when the source is a collection) -> :class:`qrlib.rl.env.RewardEnv`."""
    params = dict(cfg.reward_params)
    meta = cfg.template_meta()
    if meta.get("max_subqueries") and "max_subqueries" not in params:
        params["max_subqueries"] = meta["max_subqueries"]
    retr = qrels = queries = None
    if ds is not None:
        retr = retrieval.build_retriever(cfg.retriever, ds.corpus, **cfg.retriever_params)
        qrels, queries = ds.qrels, ds.queries
    return RewardEnv(retr, qrels or {}, reward=cfg.reward, fmt=cfg.completion_format,
                     queries=queries, mode="expand" if cfg.expansion else "rewrite", **params)
