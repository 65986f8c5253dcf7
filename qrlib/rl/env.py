"""The reward environment: the ONE place that turns a batch of completions into rewards.

``RewardEnv(retriever, qrels, reward=..., fmt=...)`` is a callable with TRL's reward
function signature, so it can be handed to ``GRPOTrainer(reward_funcs=[env])``::

    env(prompts, completions, qid=[...], query=[...], **other_columns) -> list[float]

Per call it
1. parses every completion (:func:`qrlib.generation.parsing.parse_completion`, strict or lenient);
2. builds the texts to search: the (sub-)queries themselves (``mode="rewrite"``) or the
   original query followed by the model's text (``mode="expand"``, as query-expansion
   methods do);
3. runs ALL texts of the batch through the retriever in ONE batched ``search`` call
   (duplicates searched once);
4. fuses the sub-query lists of each rollout (RSF by default, ACQO Eq. 1-2);
5. runs the reward's declared pre-step, if any (SQL execution for ``deepretrieval_sql``),
   and scores every rollout with the registered reward (:mod:`qrlib.rl.rewards`),
   group-level rewards (SAGE SCS/CRS, RL-QR) seeing their whole group;
6. appends one record per rollout to ``env.records`` (qid, queries, gold ranks, reward
   parts, format status).

Grouping: TRL's ``RepeatSampler`` puts the ``num_generations`` completions of one prompt
next to each other, but a device's slice of the batch may cut a group when the per-device
batch is not a multiple of ``num_generations``. So by default (``group_by="qid"``) a group
is *all rollouts of this call with the same qid*, wherever they sit; ``group_by=
"consecutive"`` with ``num_generations=G`` instead chunks the batch into runs of G. Keep
the per-device batch a multiple of G when using group-level rewards.

Nothing here depends on a reward's name: each :class:`qrlib.rl.rewards.RewardSpec` declares
its retrieval depth, the dataset columns it reads (missing ones are a one-line error
naming them) and its pre-step.
"""
from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import qrlib.methods.registry  # noqa: F401  (every paper's prompts, formats, rewards)
from qrlib.core.errors import QrlibError
from qrlib.generation.parsing import (ParseResult, completion_text, parse_completion,
                                     SEARCH_MODES, searched_text)
from qrlib.methods.sage import rewards as _sage_rewards  # SAGE Eq. 3, an option of every env
from qrlib.retrieval import fusion as _fusion
from qrlib.rl import rewards as _rewards

MODES = SEARCH_MODES


# --------------------------------------------------------------------------- environment
class RewardEnv:
    """Completions -> rewards (see module docstring).

    Parameters
    ----------
    retriever: anything with ``search(texts, k) -> list[list[(doc_id, score)]]``
        (``None`` only for rewards that need no retrieval, e.g. ``deepretrieval_sql``).
    qrels: ``{qid: {doc_id: grade}}``.
    reward: a name from :data:`qrlib.rl.rewards.REWARDS`; ``**reward_params`` bind its
        parameters (unknown names are errors); ``preset`` starts from one of its named
        parameter sets (``"paper"``, ``"released"``, ...).
    fmt: completion format (``deepretrieval``, ``deepretrieval-nothink``, ``acqo``,
        ``sage``, ``plain``).
    queries: ``{qid: original query}``; used for ``mode="expand"`` and the copy penalty
        when the batch has no ``query`` column.
    mode: ``"rewrite"`` (search the model's queries) or ``"expand"`` (search
        ``original + " " + model text``).
    k: metric depth; sets the reward's ``k`` parameter when it has one, and the depth of
        the nDCG logged in each record (10 when not given).
    depth: retrieval depth (default: the depth the reward declares for its parameters,
        e.g. its k, 3000 for DeepRetrieval's answer-rank tiers; at least ``k``).
    fusion: how sub-query lists are fused (``rsf``, ``rrf``, ``combsum``, ``combmnz``).
    lenient: lenient parsing (queries recovered from malformed output are searched; the
        format flag stays False so format-gated rewards still penalise).
    copy_penalty: SAGE Eq. 3 penalty p; passed as ``p`` to SAGE rewards, applied after
        any other reward (subtract p when the rewrite equals the original query).
    group_by / num_generations: how group-level rewards find their group.
    sql_timeout_s: time limit of every SQL query a reward's pre-step runs
        (:func:`qrlib.data.sql.execute_sql`).
    name: the ``__name__`` TRL logs (default ``reward``).
    """

    def __init__(self, retriever: Any, qrels: Mapping[str, Mapping[str, int]],
                 reward: str = "deepretrieval_ndcg", fmt: str = "deepretrieval", *,
                 queries: Mapping[str, str] | None = None, mode: str = "rewrite",
                 k: int | None = None, depth: int | None = None, fusion: str = "rsf",
                 lenient: bool = False, think_prefilled: bool = False,
                 max_subqueries: int | None = None, copy_penalty: float | None = None,
                 group_by: str = "qid", num_generations: int | None = None,
                 sql_timeout_s: float = 2.0, keep_records: bool = True,
                 max_records: int = 200_000, name: str | None = None,
                 preset: str | None = None, **reward_params: Any) -> None:
        if mode not in MODES:
            raise QrlibError(f"mode must be one of {list(MODES)}, got {mode!r}")
        if fusion not in _fusion.FUSIONS:
            raise QrlibError(f"unknown fusion {fusion!r}; accepted: {sorted(_fusion.FUSIONS)}")
        if group_by not in ("qid", "consecutive"):
            raise QrlibError(f"group_by must be 'qid' or 'consecutive', got {group_by!r}")
        if group_by == "consecutive" and not num_generations:
            raise QrlibError("group_by='consecutive' needs num_generations")
        spec = _rewards.REWARDS.get(reward)
        if spec is None:
            raise QrlibError(f"unknown reward {reward!r}; accepted: {sorted(_rewards.REWARDS)}")
        params = dict(reward_params)
        if k is not None and "k" in spec.defaults:
            params.setdefault("k", k)
        if "fusion" in spec.defaults:
            params.setdefault("fusion", fusion)
        self.copy_penalty = copy_penalty
        if copy_penalty is not None and "p" in spec.defaults:
            params.setdefault("p", copy_penalty)
            self._post_copy = False
        else:
            self._post_copy = copy_penalty is not None
        self.reward = _rewards.make_reward(reward, preset, **params)
        if spec.needs_retrieval and retriever is None:
            raise QrlibError(f"reward {reward!r} needs a retriever")
        self.retriever = retriever
        self.qrels = qrels
        self.fmt = fmt
        parse_completion("", fmt)  # validates fmt early
        self.queries = dict(queries or {})
        self.mode = mode
        self.k = int(k if k is not None else 10)   # depth of the nDCG logged in records
        self.depth = int(depth if depth is not None else max(self.k, self.reward.depth or 0))
        self.fusion = fusion
        self.lenient = lenient
        self.think_prefilled = think_prefilled
        self.max_subqueries = max_subqueries
        self.group_by = group_by
        self.num_generations = num_generations
        self.sql_timeout_s = sql_timeout_s
        self.hook_state: dict[str, Any] = {"sql_timeout_s": sql_timeout_s}
        self.keep_records = keep_records
        self.max_records = max_records
        self.records: list[dict[str, Any]] = []
        self.__name__ = name or reward
        self.n_calls = 0
        self.search_time_s = 0.0

    @property
    def required_columns(self) -> tuple[str, ...]:
        """Dataset columns the reward cannot do without (what training checks its rows
        for); a requirement with alternatives (``gold_sql`` or ``gold_rows``) is checked by
        :meth:`missing_columns` and on every call."""
        return tuple(c for c in self.reward.spec.columns if isinstance(c, str))

    def missing_columns(self, available: Sequence[str]) -> list[str]:
        """The reward's column requirements that ``available`` does not meet."""
        return self.reward.spec.missing_columns(set(available))

    def __repr__(self) -> str:
        return (f"RewardEnv(reward={self.reward.name!r}, fmt={self.fmt!r}, mode={self.mode!r}, "
                f"k={self.k}, depth={self.depth}, fusion={self.fusion!r}, "
                f"lenient={self.lenient})")

    # ----------------------------------------------------------------- TRL entry point
    def __call__(self, prompts: Sequence[Any] | None = None,
                 completions: Sequence[Any] | None = None, **kwargs: Any) -> list[float]:
        if completions is None:
            raise QrlibError("RewardEnv needs completions (TRL passes them as 'completions')")
        n = len(completions)
        qids = kwargs.get("qid")
        if qids is None:
            raise QrlibError("RewardEnv needs a 'qid' dataset column (one per completion)")
        qids = [str(q) for q in qids]
        if len(qids) != n:
            raise QrlibError(f"got {len(qids)} qids for {n} completions")
        originals = kwargs.get("query")
        if originals is None:
            originals = kwargs.get("original_query")
        if originals is None:
            originals = [self.queries.get(q, "") for q in qids]
        return self.score(completions, qids, list(originals), columns=kwargs)

    # ----------------------------------------------------------------- core
    def _texts(self, parsed: ParseResult, original: str) -> list[str]:
        return [searched_text(original, q, self.mode) for q in parsed.queries]

    def _groups(self, qids: list[str]) -> list[list[int]]:
        if self.group_by == "consecutive":
            g = int(self.num_generations or 1)
            return [list(range(i, min(i + g, len(qids)))) for i in range(0, len(qids), g)]
        groups: dict[str, list[int]] = {}
        for i, q in enumerate(qids):
            groups.setdefault(q, []).append(i)
        return list(groups.values())

    def score(self, completions: Sequence[Any], qids: Sequence[str],
              originals: Sequence[str] | None = None, *,
              columns: Mapping[str, Any] | None = None) -> list[float]:
        """Rewards for ``completions`` of queries ``qids`` (see module docstring)."""
        columns = columns or {}
        qids = [str(q) for q in qids]
        originals = list(originals) if originals is not None else \
            [self.queries.get(q, "") for q in qids]
        spec = self.reward.spec
        missing = sorted({q for q in qids if q not in self.qrels})
        if missing and spec.needs_retrieval:
            raise QrlibError(f"qid(s) {missing[:5]} have no qrels; pass qrels covering "
                             "every training query")
        have = {c for c, v in columns.items() if v is not None}
        lacking = spec.missing_columns(have)
        if lacking:
            raise QrlibError(f"reward {spec.name!r} needs dataset column(s) "
                             f"{', '.join(lacking)}; the batch has: {', '.join(sorted(have))}")
        wanted = [c for c in spec.column_names() if c in have]
        for c in wanted:
            if len(columns[c]) != len(completions):
                raise QrlibError(f"column {c!r} has {len(columns[c])} values for "
                                 f"{len(completions)} completions")
        parsed: list[ParseResult] = []
        raw_texts: list[str] = []
        for c in completions:
            p = parse_completion(c, self.fmt, lenient=self.lenient,
                                 think_prefilled=self.think_prefilled,
                                 max_subqueries=self.max_subqueries)
            parsed.append(p)
            raw_texts.append(completion_text(c))
        texts = [self._texts(p, o) for p, o in zip(parsed, originals)]

        # one batched search for the whole batch
        sub_lists: list[list[list[tuple[str, float]]]] = [[] for _ in parsed]
        if self.reward.spec.needs_retrieval:
            unique = list(dict.fromkeys(t for ts in texts for t in ts))
            t0 = time.perf_counter()
            results = self.retriever.search(unique, self.depth) if unique else []
            self.search_time_s += time.perf_counter() - t0
            if len(results) != len(unique):
                raise QrlibError(f"retriever returned {len(results)} lists for "
                                 f"{len(unique)} queries")
            by_text = dict(zip(unique, results))
            sub_lists = [[list(by_text[t]) for t in ts] for ts in texts]
        fused = [_fusion.fuse(s, self.fusion, top=self.depth) if s else [] for s in sub_lists]

        obs = []
        for i, p in enumerate(parsed):
            t = raw_texts[i]
            obs.append(_rewards.Observation(
                qid=qids[i], ranked=fused[i], qrels=self.qrels.get(qids[i], {}),
                format_ok=p.ok, sub_ranked=sub_lists[i], queries=texts[i],
                original_query=originals[i], strategy=p.strategy,
                tagged="<answer>" in t and "</answer>" in t, n_outside=p.n_outside,
                n_chars=sum(1 for ch in t if not ch.isspace()),
                generated=list(p.queries), row={c: columns[c][i] for c in wanted}))
        if spec.prepare is not None:
            spec.prepare(obs, self.hook_state)

        parts: list[dict[str, float]] = [dict() for _ in obs]
        for idx in self._groups(qids):
            scored = self.reward.score([obs[i] for i in idx])
            for i, d in zip(idx, scored):
                parts[i] = d
        out = []
        for i, d in enumerate(parts):
            r = d["reward"]
            if self._post_copy and texts[i]:
                r2 = _sage_rewards.copy_penalty(r, " ".join(parsed[i].queries), originals[i],
                                                self.copy_penalty or 0.0)
                d["copy_penalty"] = r2 - r
                r = r2
            out.append(float(r))
        self.n_calls += 1
        self.last_observations = obs  # what this call scored (sub-lists, fused list), for probes
        if self.keep_records:
            self._record(qids, parsed, texts, obs, parts, out)
        return out

    def _record(self, qids, parsed, texts, obs, parts, out) -> None:
        for i, p in enumerate(parsed):
            ranks = _rewards.gold_ranks(obs[i].ranked, obs[i].qrels)
            rec = {"call": self.n_calls, "qid": qids[i], "queries": texts[i],
                   "n_queries": len(texts[i]), "format_ok": p.ok, "error": p.error,
                   "recovered": p.recovered, "strategy": p.strategy, "gold_ranks": ranks,
                   "n_gold": sum(1 for g in obs[i].qrels.values() if g > 0),
                   f"ndcg@{self.k}": _rewards.ndcg_at_k(obs[i].ranked, obs[i].qrels, self.k)
                   if obs[i].ranked else 0.0,
                   "reward": out[i]}
            rec.update({f"part_{k}": v for k, v in parts[i].items() if k != "reward"})
            for key in self.reward.spec.record:
                if key in obs[i].extras:
                    rec[key] = obs[i].extras[key]
            self.records.append(rec)
        if len(self.records) > self.max_records:
            del self.records[: len(self.records) - self.max_records]

    def records_frame(self):
        """``env.records`` as a pandas DataFrame."""
        import pandas as pd
        return pd.DataFrame(self.records)

    def reset_records(self) -> None:
        self.records.clear()

