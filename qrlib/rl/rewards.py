"""The reward registry and the ranking basics every paper's rewards share.

Pure maths (no disk, no models): every reward takes ranked lists, gold labels and format
flags and returns numbers. In the spirit of ir-measures: one named object per reward, typed
parameters with defaults, the paper it comes from. This module holds the shared pieces:
ranking basics (:func:`gold_ranks`, :func:`recall_at`, :func:`ndcg_at_k`), "is this the
original query" (:func:`same_query`), the rollout :class:`Observation`, the registry
(:data:`REWARDS`, :func:`register_reward`, :func:`make_reward`, :func:`list_rewards`) and
the paper-neutral ``ndcg`` reward. Each paper registers its own rewards from
``qrlib/methods/<paper>/rewards.py``:

* :mod:`qrlib.methods.deepretrieval.rewards`: Table 8 tiers, nDCG, SQL execution accuracy,
  with ``paper`` and ``released`` presets;
* :mod:`qrlib.methods.acqo.rewards`: Eq. 3-10 and ConvSearch-R1's released rank reward;
* :mod:`qrlib.methods.sage.rewards`: SCS, CRS, the copy penalty (Eq. 1-3);
* :mod:`qrlib.methods.rlqr.rewards`: NDCG plus the group-normalised penalty (Eq. 5-6).

A params file says ``reward: acqo_stage2`` with ``reward_params: {eta: 0.6}`` (or
``{preset: released}``); :func:`make_reward` binds it (importing every paper first when the
name is not registered yet, :func:`qrlib.core.registry.load_methods`) and
:func:`list_rewards` lists them all. Each registered reward declares what
:class:`qrlib.rl.env.RewardEnv` must give it: its retrieval depth, the dataset columns it
reads and, where needed, a pre-step (SQL execution), so the environment never looks at
reward names.

Conventions: ranks are 1-based; a ranked list is ``[(doc_id, score), ...]`` best first;
qrels are ``{doc_id: grade}`` with grade > 0 relevant. A document repeated in a ranked
list counts once, at its first position, and the documents after it move up: that is how
:func:`qrlib.eval.metrics.evaluate` (and trec_eval, which reads a run as doc -> score) scores
such a list, so the per-rollout numbers here agree with the evaluation tables.
"""
from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from qrlib.core.errors import QrlibError
from qrlib.core.registry import load_methods
from qrlib.retrieval.fusion import unique_ranked

Ranked = Sequence[tuple[str, float]]


# =========================================================================== ranking basics
def gold_ranks(ranked: Ranked, qrels: Mapping[str, int], k: int | None = None,
               min_rel: int = 1) -> list[int]:
    """1-based ranks (ascending) of the relevant documents within the top ``k`` of
    ``ranked``, each document counted at its first occurrence only."""
    out: list[int] = []
    for r, d, _ in unique_ranked(ranked):
        if k is not None and r > k:
            break
        if qrels.get(d, 0) >= min_rel:
            out.append(r)
    return out


def recall_at(ranked: Ranked, qrels: Mapping[str, int], k: int | None = None,
              min_rel: int = 1) -> float:
    """Fraction of the relevant documents found in the top ``k`` (0 when none are judged)."""
    n_rel = sum(1 for g in qrels.values() if g >= min_rel)
    if n_rel == 0:
        return 0.0
    return len(gold_ranks(ranked, qrels, k, min_rel)) / n_rel


def ndcg_at_k(ranked: Ranked, qrels: Mapping[str, int], k: int = 10) -> float:
    """nDCG@k with linear gains and a log2(i + 1) discount, as trec_eval / ir-measures
    ``nDCG@k`` compute it (cross-checked in the tests); grades <= 0 count as 0 and a
    repeated document counts once.

    Written out by hand on purpose: it runs per rollout inside the reward loop, where a
    call into ir-measures per completion would cost far more than the arithmetic.
    """
    if k <= 0:
        raise QrlibError(f"nDCG cut-off k must be positive, got {k}")
    dcg = 0.0
    for i, d, _ in unique_ranked(ranked):
        if i > k:
            break
        g = qrels.get(d, 0)
        if g > 0:
            dcg += g / math.log2(i + 1)
    ideal = sorted((g for g in qrels.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 1) for i, g in enumerate(ideal, start=1))
    return dcg / idcg if idcg > 0 else 0.0


def normalise_query(q: str) -> str:
    """Case-folded text with runs of whitespace collapsed to one space."""
    return " ".join(str(q).casefold().split())


def same_query(a: str, b: str) -> bool:
    """The one definition of "the rewrite equals the original query" (SAGE Eq. 3's copy
    test, the ``modified`` share logged by training and by :mod:`qrlib.generation.policy`): equal
    after :func:`normalise_query`."""
    return normalise_query(a) == normalise_query(b)


def reward_variance_zero(rewards: Iterable[float], tol: float = 1e-12) -> bool:
    """True when a group's rewards are all equal (TRL's frac_reward_zero_std counts these
    groups: GRPO gets no advantage signal from them)."""
    vals = list(rewards)
    return len(vals) > 0 and (max(vals) - min(vals)) <= tol


# =========================================================================== observation
@dataclass
class Observation:
    """Everything a reward may read about one rollout (filled by :class:`RewardEnv`).

    ranked: final ranked list (fused when there were several sub-queries);
    sub_ranked: one list per sub-query; queries: the texts sent to the retriever
    (``original + text`` in expansion mode); generated: the model's own query texts as
    parsed (default: ``queries``); original_query: the dataset query; format_ok: the format held; tagged: an
    ``<answer>`` block was present; n_outside / n_chars: non-space characters outside the
    answer block / in the completion; row: the extra dataset columns the reward declared
    (``db_path``, ``gold_sql``, ...) for this rollout; extras: what a reward's pre-step
    computed (e.g. SQL result rows).
    """

    qid: str
    ranked: list[tuple[str, float]]
    qrels: Mapping[str, int]
    format_ok: bool = True
    sub_ranked: list[list[tuple[str, float]]] = field(default_factory=list)
    queries: list[str] = field(default_factory=list)
    original_query: str = ""
    strategy: int | None = None
    tagged: bool = False
    n_outside: int = 0
    n_chars: int = 0
    extras: dict[str, Any] = field(default_factory=dict)
    generated: list[str] = field(default_factory=list)
    row: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.generated and self.queries:   # rewrite mode: the same texts
            self.generated = list(self.queries)


# =========================================================================== registry
Columns = tuple[str | tuple[str, ...], ...]


@dataclass(frozen=True)
class RewardSpec:
    """A registered reward.

    level: ``"rollout"`` (``fn(obs, **p) -> dict``) or ``"group"`` (``fn(list[obs], **p)
    -> list[dict]``); defaults: its keyword parameters; presets: named parameter sets
    (``"paper"`` and, where a peer's released code differs, ``"released"``);
    needs_retrieval: False for rewards that never search (SQL); depth: params -> the
    retrieval depth the reward reads (default: its ``k``); columns: the dataset columns
    it needs, a tuple of names meaning "any one of them"; prepare: a pre-step run once
    per batch on all observations before scoring, ``prepare(observations, state)``
    (state: a dict the environment keeps across calls, with ``sql_timeout_s``); record:
    ``extras`` keys copied into the environment's per-rollout records.
    """

    name: str
    fn: Callable[..., Any]
    level: str
    defaults: dict[str, Any]
    source: str
    doc: str
    needs_retrieval: bool = True
    depth: Callable[[Mapping[str, Any]], int] | None = None
    columns: Columns = ()
    prepare: Callable[[list[Observation], dict[str, Any]], None] | None = None
    presets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    record: tuple[str, ...] = ()

    def depth_for(self, params: Mapping[str, Any]) -> int | None:
        """Retrieval depth for bound ``params`` (None: the reward searches nothing)."""
        if not self.needs_retrieval:
            return None
        if self.depth is not None:
            return int(self.depth(params))
        return int(params["k"]) if "k" in params else None

    def column_names(self) -> list[str]:
        return [c for req in self.columns for c in ((req,) if isinstance(req, str) else req)]

    def missing_columns(self, available: Collection[str]) -> list[str]:
        """The declared column requirements that ``available`` does not meet."""
        out = []
        for req in self.columns:
            alts = (req,) if isinstance(req, str) else tuple(req)
            if not any(a in available for a in alts):
                out.append(" or ".join(alts))
        return out


REWARDS: dict[str, RewardSpec] = {}


def register_reward(name: str, *, level: str = "rollout", source: str = "",
                    needs_retrieval: bool = True,
                    depth: Callable[[Mapping[str, Any]], int] | None = None,
                    columns: Columns = (),
                    prepare: Callable[[list[Observation], dict[str, Any]], None] | None = None,
                    presets: Mapping[str, Mapping[str, Any]] | None = None,
                    record: tuple[str, ...] = ()) -> Callable:
    """Decorator: register ``fn`` under ``name``; its keyword-only arguments with
    defaults are the parameters. ``presets`` defaults to ``{"paper": {}}`` (the
    defaults are the paper's values, or ours where the paper gives none)."""
    if level not in ("rollout", "group"):
        raise QrlibError(f"reward level must be 'rollout' or 'group', got {level!r}")

    def deco(fn: Callable) -> Callable:
        if name in REWARDS:
            raise QrlibError(f"reward {name!r} is registered twice")
        sig = inspect.signature(fn)
        defaults = {p.name: p.default for p in sig.parameters.values()
                    if p.kind is p.KEYWORD_ONLY}
        sets = {"paper": {}} if presets is None else {k: dict(v) for k, v in presets.items()}
        for pname, values in sets.items():
            bad = sorted(set(values) - set(defaults))
            if bad:
                raise QrlibError(f"reward {name!r} preset {pname!r} sets unknown "
                                 f"parameter(s) {bad}")
        doc = inspect.getdoc(fn) or ""
        REWARDS[name] = RewardSpec(name, fn, level, defaults, source,
                                   doc.splitlines()[0] if doc else "", needs_retrieval,
                                   depth, tuple(columns), prepare, sets, tuple(record))
        return fn
    return deco


@dataclass
class Reward:
    """A registered reward bound to its parameters. ``score(group)`` -> one dict per
    rollout with the key ``reward`` and the reward's parts."""

    spec: RewardSpec
    params: dict[str, Any]
    preset: str | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def level(self) -> str:
        return self.spec.level

    @property
    def depth(self) -> int | None:
        return self.spec.depth_for(self.params)

    def score(self, group: Sequence[Observation]) -> list[dict[str, float]]:
        if self.spec.level == "group":
            out = self.spec.fn(list(group), **self.params)
        else:
            out = [self.spec.fn(o, **self.params) for o in group]
        return [{k: float(v) for k, v in d.items()} for d in out]


def make_reward(name: str, preset: str | None = None, **params: Any) -> Reward:
    """Look up reward ``name``, start from its defaults or from the named ``preset``
    (``"paper"``, ``"released"``, ... as the reward declares) and apply ``params`` on
    top. Unknown names, presets and parameters are one-line errors."""
    if name not in REWARDS:
        load_methods()
    if name not in REWARDS:
        raise QrlibError(f"unknown reward {name!r}; accepted: {sorted(REWARDS)}")
    spec = REWARDS[name]
    bad = sorted(set(params) - set(spec.defaults))
    if bad:
        raise QrlibError(f"reward {name!r} has no parameter(s) {bad}; "
                         f"accepted: {sorted(spec.defaults)}")
    base = dict(spec.defaults)
    if preset is not None:
        if preset not in spec.presets:
            raise QrlibError(f"reward {name!r} has no preset {preset!r}; "
                             f"accepted: {sorted(spec.presets)}")
        base.update(spec.presets[preset])
    return Reward(spec, {**base, **params}, preset)


def list_rewards() -> list[dict[str, Any]]:
    """One row per registered reward: name, level, parameters, presets, columns, source,
    summary."""
    load_methods()
    return [{"name": s.name, "level": s.level, "params": dict(s.defaults),
             "presets": sorted(s.presets), "columns": s.column_names(),
             "source": s.source, "summary": s.doc} for s in REWARDS.values()]


@register_reward("ndcg", source="nDCG@k (Jarvelin & Kekalainen 2002)")
def _r_ndcg(o: Observation, *, k: int = 10) -> dict:
    """Plain nDCG@k of the final list (0 for an unusable completion)."""
    v = ndcg_at_k(o.ranked, o.qrels, k)
    return {"reward": v, "ndcg": v}
