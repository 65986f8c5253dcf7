"""Rewriting a whole query set with a policy model (greedy), one row per query.

:func:`rewrite_queries` renders each query through a prompt (:mod:`qrlib.generation.prompts`),
generates with :func:`qrlib.generation.policy.generate`, parses the completion (:mod:`qrlib.generation.parsing`)
and decides what is searched. It sits apart from :mod:`qrlib.generation.policy` (which loads and runs
models and knows nothing about rewards) because "is the rewrite the original query?" is the
reward package's definition (:func:`qrlib.rl.rewards.same_query`).
"""
from __future__ import annotations

from typing import Any

import qrlib.methods.registry  # noqa: F401  (every paper's prompts, formats, rewards)
from qrlib.core.errors import QrlibError
from qrlib.generation import engine, policy
from qrlib.generation.contract import decoding_settings
from qrlib.generation.parsing import parse_completion, searched_text
from qrlib.generation.prompts import as_template, render_prompt
from qrlib.rl.rewards import same_query

__all__ = ["rewrite_queries", "sample_rewrites"]


def rewrite_queries(model: Any, tokenizer: Any, queries: dict[str, str], prompt: Any = None,
                    *, fmt: str | None = None, prefill: str | None = None,
                    mode: str = "rewrite", max_new_tokens: int | None = None,
                    batch_size: int = 16, progress: bool = True,
                    autocast: bool | None = False, stop: Any = None,
                    contract: Any = None) -> "Any":
    """Greedy rewrite of every query of ``{qid: text}``; one row per query.

    ``contract``: a :class:`~qrlib.generation.contract.DecodingContract` or the adapter
    folder a training run wrote (its ``decoding.json``): the prompt, prefill, stop
    strings, token budget and parser of training; an explicit ``prompt`` / ``fmt`` /
    ``prefill`` / ``max_new_tokens`` / ``stop`` that differs from it is a one-line error.
    Without a contract the defaults are ``fmt="deepretrieval-nothink"``, no prefill, 32
    tokens and no stop string, and ``prompt`` is required.

    Columns: ``qid, query, completion, format_ok, rewrite, search_text, modified,
    gen_tokens, gen_seconds`` (per-query share of the batch time). The completion is parsed
    leniently (``qrlib.generation.parsing``); a query whose completion yields nothing is searched as
    the original text (``rewrite`` empty, ``modified`` False). ``mode="expand"`` searches
    ``original + " " + rewrite`` (query expansion); ``"rewrite"`` the rewrite alone.
    ``prompt`` is a registry name or an inline ``{system, user}`` mapping. ``autocast``:
    bf16 autocast on CPU (:func:`qrlib.generation.policy.generate`; off by default so greedy outputs
    stay those of the fp32 model, None: on where the CPU has native bf16 matmul).
    """
    import time

    import pandas as pd

    if mode not in ("rewrite", "expand"):
        raise QrlibError(f"mode must be 'rewrite' or 'expand', got {mode!r}")
    d = decoding_settings(contract, prompt=prompt, fmt=fmt, prefill=prefill,
                          max_new_tokens=max_new_tokens, stop=stop)
    prompt, fmt, prefill, max_new_tokens, stop = (d["prompt"], d["fmt"], d["prefill"],
                                                  d["max_new_tokens"], d["stop"])
    if prompt is None:
        raise QrlibError("rewrite_queries needs a prompt or a contract (an adapter folder "
                         "or a DecodingContract)")
    fmt = "deepretrieval-nothink" if fmt is None else fmt
    prefill = "" if prefill is None else prefill
    max_new_tokens = 32 if max_new_tokens is None else max_new_tokens
    qids = list(queries)
    rows = []
    batch_size = engine.chunk_size(batch_size, len(qids))
    starts = range(0, len(qids), batch_size)
    if progress:
        from tqdm.auto import tqdm

        starts = tqdm(starts, desc="rewrite", unit="batch")
    for s in starts:
        chunk = qids[s:s + batch_size]
        texts = [render_prompt(prompt, tokenizer, queries[q], prefill) for q in chunk]
        t0 = time.perf_counter()
        outs = policy.generate(model, tokenizer, texts, max_new_tokens=max_new_tokens,
                               batch_size=batch_size, autocast=autocast, stop=stop or None)
        per = (time.perf_counter() - t0) / len(chunk)
        rows += [_row(tokenizer, q, queries[q], out, fmt, prefill, mode, per)
                 for q, out in zip(chunk, outs)]
    return pd.DataFrame(rows)


def _row(tokenizer: Any, qid: str, orig: str, out: str, fmt: str, prefill: str, mode: str,
         seconds: float) -> dict[str, Any]:
    """One completion -> the row :func:`rewrite_queries` documents."""
    full = prefill + out
    strict = parse_completion(full, fmt)
    p = strict if strict.ok else parse_completion(full, fmt, lenient=True)
    rw = p.queries[0] if p.queries else ""
    return {"qid": qid, "query": orig, "completion": out, "format_ok": strict.ok,
            "rewrite": rw, "search_text": searched_text(orig, rw, mode),
            "modified": bool(rw) and not same_query(rw, orig),
            "strategy": p.strategy,
            "gen_tokens": len(tokenizer(out, add_special_tokens=False)["input_ids"]),
            "gen_seconds": seconds}


def sample_rewrites(model: Any, tokenizer: Any, queries: dict[str, str], prompt: Any,
                    n: int, *, fmt: str | None = None, prefill: str | None = None,
                    mode: str = "rewrite", max_new_tokens: int = 32,
                    temperature: float = 1.0, top_p: float = 1.0, batch_size: int = 32,
                    seed: int = 0, autocast: bool | None = None,
                    progress: bool = True) -> "Any":
    """``n`` sampled rewrites of every query (best-of-N pools, SAGE Sec. 3.1); one row per
    sample with the columns of :func:`rewrite_queries` plus ``sample`` (0..n-1). ``fmt``
    and ``prefill`` default to the prompt's ``meta``. Sampling is seeded; bf16 autocast on
    CPU follows :func:`qrlib.generation.policy.use_cpu_autocast` unless ``autocast`` is given."""
    import time

    import pandas as pd

    if n < 1:
        raise QrlibError(f"n (samples per query) must be >= 1, got {n}")
    if mode not in ("rewrite", "expand"):
        raise QrlibError(f"mode must be 'rewrite' or 'expand', got {mode!r}")
    meta = as_template(prompt).meta
    fmt = fmt or meta.get("fmt", "deepretrieval-nothink")
    prefill = meta.get("prefill", "") if prefill is None else prefill
    qids = list(queries)
    per_batch = engine.chunk_size(max(1, batch_size // n), len(qids))
    rows: list[dict[str, Any]] = []
    starts = range(0, len(qids), per_batch)
    if progress:
        from tqdm.auto import tqdm

        starts = tqdm(starts, desc=f"sample {getattr(prompt, 'name', prompt)}", unit="batch")
    for b, s in enumerate(starts):
        chunk = qids[s:s + per_batch]
        texts = [render_prompt(prompt, tokenizer, queries[q], prefill) for q in chunk]
        t0 = time.perf_counter()
        outs = policy.generate(model, tokenizer, texts, max_new_tokens=max_new_tokens,
                               do_sample=True, temperature=temperature, top_p=top_p,
                               num_return_sequences=n, batch_size=len(texts),
                               seed=seed + b, autocast=autocast)
        per = (time.perf_counter() - t0) / len(outs)
        for i, out in enumerate(outs):
            q = chunk[i // n]
            rows.append({**_row(tokenizer, q, queries[q], out, fmt, prefill, mode, per),
                         "sample": i % n})
    return pd.DataFrame(rows)
