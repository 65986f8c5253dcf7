"""ACQO's two-stage curriculum around the training engine (ACQO Sec. 3.4).

Stage I trains on every training question with the power-set reward (Eq. 6); then the
Stage I model samples K decompositions per training question, their mean Stage I reward
is the question's learning complexity tau(q) (Eq. 7), and Stage II trains only on the
questions with tau(q) <= tau_thres (Eq. 8) with the full-ensemble reward (Eq. 9-10),
starting from the Stage I adapter. RL itself is :func:`qrlib.rl.train.train`'s; this module
holds the glue: sampling decompositions, scoring them, the tau filter, and evaluating a
set of decompositions by retrieving every sub-query and fusing the lists.
"""
from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import qrlib.methods.registry  # noqa: F401  (prompt and format names come from callers)
from qrlib.core.errors import QrlibError
from qrlib.generation import policy  # policy.generate: late-bound, patchable in tests
from qrlib.generation.contract import decoding_settings
from qrlib.generation.engine import chunk_size
from qrlib.generation.parsing import parse_completion
from qrlib.generation.prompts import as_template, render_prompt
from qrlib.methods.acqo.rewards import acqo_curriculum, acqo_tau
from qrlib.retrieval import fusion as F
from qrlib.rl.rewards import ndcg_at_k


def generate_decompositions(model: Any, tokenizer: Any, rows: Sequence[Mapping[str, Any]],
                            prompt: Any = None, *, prefill: str | None = None,
                            fmt: str | None = None, max_subqueries: int | None = 3,
                            n: int = 1, do_sample: bool = False, temperature: float = 1.0,
                            top_p: float = 1.0, max_new_tokens: int | None = None,
                            batch_size: int = 8, seed: int | None = None,
                            progress: bool = True, autocast: bool | None = False,
                            stop: Any = None, contract: Any = None) -> list[dict[str, Any]]:
    """``n`` decompositions per row (greedy unless ``do_sample``), parsed.

    ``contract``: a :class:`~qrlib.generation.contract.DecodingContract` or the adapter folder
    a training run wrote: its prompt, prefill, stop strings, budget and parser, refusing an
    explicit argument that differs (:func:`~qrlib.generation.contract.decoding_settings`).
    Without one: ``prompt`` is required, ``fmt="acqo"``, no prefill, 64 tokens, no stop.

    ``autocast``: bf16 autocast of the matmuls on CPU (:func:`qrlib.generation.policy.generate`); about
    4x faster generation here, at the price of outputs that may differ from fp32 decoding.

    One dict per (row, sample): ``qid``, ``sample``, ``completion`` (prefill included),
    ``format_ok`` (strict parse), ``subqueries`` (lenient parse; the original question
    when nothing can be recovered, so every question is searched), ``recovered``
    (the sub-queries came from the lenient parser or the fallback), ``gen_tokens``,
    ``gen_seconds`` (the row's share of its batch time).
    """
    d = decoding_settings(contract, prompt=prompt, fmt=fmt, prefill=prefill,
                          max_new_tokens=max_new_tokens, stop=stop)
    if d["prompt"] is None:
        raise QrlibError("generate_decompositions needs a prompt or a contract (an adapter "
                         "folder or a DecodingContract)")
    template = as_template(d["prompt"])
    fmt = d["fmt"] or "acqo"
    prefill = d["prefill"] or ""
    max_new_tokens = d["max_new_tokens"] or 64
    stop = d["stop"] or None
    out: list[dict[str, Any]] = []
    batch_size = chunk_size(batch_size, len(rows))
    starts = range(0, len(rows), batch_size)
    if progress:
        from tqdm.auto import tqdm

        starts = tqdm(starts, desc="decompose", unit="batch")
    for s in starts:
        chunk = rows[s:s + batch_size]
        texts = [render_prompt(template, tokenizer, prefill=prefill,
                               **{f: r[f] for f in template.fields}) for r in chunk]
        t0 = time.perf_counter()
        outs = policy.generate(model, tokenizer, texts, max_new_tokens=max_new_tokens,
                               do_sample=do_sample, temperature=temperature, top_p=top_p,
                               num_return_sequences=n, batch_size=batch_size, seed=seed,
                               autocast=autocast, stop=stop)
        per = (time.perf_counter() - t0) / max(len(outs), 1)
        for i, comp in enumerate(outs):
            r = chunk[i // n]
            full = prefill + comp
            strict = parse_completion(full, fmt, max_subqueries=max_subqueries)
            loose = strict if strict.ok else parse_completion(full, fmt, lenient=True,
                                                              max_subqueries=max_subqueries)
            subs = list(loose.queries) or [r.get("question") or r.get("query") or ""]
            out.append({"qid": r["qid"], "sample": i % n, "completion": full,
                        "format_ok": strict.ok, "subqueries": subs,
                        "recovered": not strict.ok,
                        "gen_tokens": len(tokenizer(comp, add_special_tokens=False)["input_ids"]),
                        "gen_seconds": per})
    return out


def search_fused(retriever: Any, subqueries: Mapping[str, Sequence[str]], *, k: int = 100,
                 fusion: str = "rsf") -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """Retrieve every sub-query (one batched call, duplicates once), fuse each question's
    lists (ACQO Eq. 1-2 for ``rsf``) and return a metric-ready run {qid: {doc: score}} and
    the wall seconds of (``retrieval``, ``fusion``)."""
    unique = list(dict.fromkeys(s for subs in subqueries.values() for s in subs))
    if not unique:
        raise QrlibError("search_fused: no sub-queries to search")
    t0 = time.perf_counter()
    lists = dict(zip(unique, retriever.search(unique, k)))
    t1 = time.perf_counter()
    run = {q: F.to_run(F.fuse([lists[s] for s in subs], fusion, top=k))
           for q, subs in subqueries.items() if subs}
    t2 = time.perf_counter()
    return run, {"retrieval": t1 - t0, "fusion": t2 - t1}


def rejection_targets(candidates: Sequence[Mapping[str, Any]],
                      copy_reward: Mapping[str, float]) -> dict[str, dict[str, Any]]:
    """Rejection-sampling cold start: the best sampled decomposition of each question.

    ``candidates``: one dict per sample with ``qid``, ``completion``, ``format_ok`` and
    ``reward`` (the score of the fused list of *all* its sub-queries, i.e. what the test
    measures); ``copy_reward[qid]``: the same score for the question searched as it is.
    A question's target is its best format-valid sample when that beats the copy strictly,
    else the copy itself (``completion=None``): the model is shown when splitting helps
    and, otherwise, to leave the question alone (ACQO's "return it unchanged" rule).
    Ties between samples go to the earliest. Returns ``{qid: {"completion", "reward",
    "copy_reward", "gain", "sampled"}}`` for every qid of ``copy_reward``.
    """
    best: dict[str, Mapping[str, Any]] = {}
    for c in candidates:
        q = str(c["qid"])
        if q not in copy_reward:
            raise QrlibError(f"rejection_targets: sample of qid {q!r} has no copy reward")
        if c.get("format_ok") and (q not in best or float(c["reward"]) > float(best[q]["reward"])):
            best[q] = c
    out: dict[str, dict[str, Any]] = {}
    for q, base in copy_reward.items():
        b = best.get(q)
        if b is not None and float(b["reward"]) > float(base):
            out[q] = {"completion": b["completion"], "reward": float(b["reward"]),
                      "copy_reward": float(base), "gain": float(b["reward"]) - float(base),
                      "sampled": True}
        else:
            out[q] = {"completion": None, "reward": float(base), "copy_reward": float(base),
                      "gain": 0.0, "sampled": False}
    return out


def tau_by_question(rewards: Sequence[float], qids: Sequence[str]) -> dict[str, float]:
    """ACQO Eq. 7: tau(q) = mean Stage I reward of the K rollouts of question q."""
    if len(rewards) != len(qids):
        raise QrlibError(f"{len(rewards)} rewards for {len(qids)} qids")
    by: dict[str, list[float]] = {}
    for q, r in zip(qids, rewards):
        by.setdefault(str(q), []).append(float(r))
    return {q: acqo_tau(v) for q, v in by.items()}


def keep_for_stage2(tau: Mapping[str, float], tau_thres: float = 5 / 3,
                    tau_min: float | None = None) -> list[str]:
    """ACQO Eq. 8: questions with tau(q) <= tau_thres (sorted); with ``tau_min``, only those
    above it too (our lower bound: a question whose Stage I rollouts all fail gives a group
    without reward spread, from which Stage II learns nothing)."""
    kept = acqo_curriculum(tau, tau_thres)
    if tau_min is not None:
        kept = [q for q in kept if tau[q] > tau_min]
    return sorted(kept)


def weaker_share(scores: Mapping[str, float], share: float = 0.5) -> list[str]:
    """ACQO App. B's Stage I pre-filter on HotpotQA: keep the ``share`` of the questions
    whose raw question scores lowest (``scores``: question id -> the reward of the question
    searched as it is), dropping the higher-performing ones. Ties are broken by question
    id, so the choice is deterministic. Returns the kept ids, sorted."""
    if not 0 < share <= 1:
        raise QrlibError(f"share must be in (0, 1], got {share}")
    order = sorted(scores, key=lambda q: (float(scores[q]), str(q)))
    n = max(1, round(len(order) * share)) if order else 0
    return sorted(order[:n])


class SubqueryProbe:
    """A reward callable wrapping a :class:`qrlib.rl.env.RewardEnv` that adds, to every record
    the env writes, the nDCG@``k`` of the fused list of all the rollout's sub-queries
    (``part_fused_ndcg@k``) and of its best single sub-query (``part_best_sub_ndcg@k``):
    ACQO Fig. 4's two curves. It reads the lists the env has just retrieved and fused
    (``env.last_observations``, searched at the env's depth), so it searches nothing
    again. Rewards are the env's, unchanged.
    """

    def __init__(self, env: Any, k: int = 10) -> None:
        self.env = env
        self.k = int(k)
        self.__name__ = getattr(env, "__name__", "reward")

    @property
    def records(self) -> list[dict[str, Any]]:
        return self.env.records

    @property
    def required_columns(self) -> tuple[str, ...]:
        return tuple(getattr(self.env, "required_columns", ()) or ())

    def missing_columns(self, available: Any) -> list[str]:
        return list(self.env.missing_columns(available)) if hasattr(self.env, "missing_columns") else []

    def __repr__(self) -> str:
        return f"SubqueryProbe({self.env!r}, k={self.k})"

    def __call__(self, prompts: Any = None, completions: Any = None, **cols: Any) -> list[float]:
        n0 = len(self.env.records)
        out = self.env(prompts, completions, **cols)
        for rec, o in zip(self.env.records[n0:], self.env.last_observations):
            vals = [ndcg_at_k(lst, o.qrels, self.k) for lst in o.sub_ranked]
            rec[f"part_best_sub_ndcg@{self.k}"] = max(vals) if vals else 0.0
            rec[f"part_fused_ndcg@{self.k}"] = ndcg_at_k(o.ranked, o.qrels, self.k) if vals else 0.0
        return out
