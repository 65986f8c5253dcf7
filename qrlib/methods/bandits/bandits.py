"""Multi-armed bandits over sub-queries (Petcu et al. 2025, "Query Decomposition for RAG:
Balancing Exploration-Exploitation").

Setting (Sec. 3.2, Figure 2): a request is decomposed into K sub-queries; sub-query i has a
ranked list ``D_i = (d_i1, ..., d_iN)``. Each sub-query is an *arm*. Pulling arm ``a``
reads the next document of ``D_a`` that has not been selected yet (documents already
selected through another arm are skipped, unobserved), observes a reward and updates the
arm's posterior. The run stops after a budget of ``b`` (a fraction of the pooled unique
documents) selections.

Everything here is numpy and vectorised over R independent repetitions: the state of one
request is a set of ``(R, K)`` arrays. A policy never looks at the budget, so a single run
to 100 % gives every budget as a prefix of the selection order (:func:`simulate` returns
that order; :func:`precision_recall` cuts it).

Policies (Table 1) are :class:`Policy` specs in :data:`POLICIES`; rewards and posterior
updates are small pure functions below, each citing its row of Table 1 / algorithm.
Hierarchical correlated bandits (Sec. 3.4): children of a parent arm become active, with
prior ``Beta(lambda*alpha_p, lambda*beta_p)``, once the parent has been observed ``n``
times and its posterior mean exceeds ``tau`` (defaults n=4, tau=0.77, lambda=0.91, Sec.
5.3).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from qrlib.core.errors import QrlibError
from qrlib.eval.metrics import evaluate

__all__ = [
    "Request", "Policy", "POLICIES", "PAPER_ORDER", "make_request", "simulate",
    "budget_counts", "precision_recall", "mean_ci", "topk_window", "novelty",
    "reward_bernoulli", "reward_ucb", "ucb_bonus", "reward_topk", "reward_rank_aware",
    "reward_diversity", "reward_diversity_concave", "reward_topk_ucb_diversity",
    "beta_update", "gaussian_posterior", "inherit_prior", "should_expand",
    "alpha_ndcg", "subtopic_qrels",
]


# =========================================================================== requests
@dataclass(frozen=True)
class Request:
    """One request's arms, with documents mapped to local indices ``0..U-1``.

    ``lists``: (K, N) int, the sub-queries' ranked lists, padded with ``U`` (no document);
    ``rel``: (U,) float relevance of each unique document (0/1 in the human-judgment
    setting); ``scores``: (K, N) float retrieval scores normalised to [0, 1] (Gaussian
    policy, Algorithm 2); ``sim``: (U, U) cosine similarity of document embeddings or None
    (diversity policies then see novelty 1); ``parent``: (K,) parent arm index or -1
    (hierarchy; -1 everywhere for a serial decomposition); ``doc_ids``: local -> doc id.
    """

    lists: np.ndarray
    rel: np.ndarray
    scores: np.ndarray
    sim: np.ndarray | None
    parent: np.ndarray
    doc_ids: tuple[str, ...]
    queries: tuple[str, ...] = ()

    @property
    def n_arms(self) -> int:
        return int(self.lists.shape[0])

    @property
    def n_docs(self) -> int:
        return len(self.doc_ids)


def make_request(ranked: Sequence[Sequence[tuple[str, float]] | Sequence[str]],
                 relevance: Mapping[str, float], *,
                 embeddings: Mapping[str, np.ndarray] | np.ndarray | None = None,
                 parent: Sequence[int] | None = None,
                 queries: Sequence[str] = ()) -> Request:
    """Build a :class:`Request` from one ranked list per sub-query.

    ``ranked[i]`` is a list of ``(doc_id, score)`` (as :meth:`Retriever.search` returns) or
    of doc ids (scores then decrease linearly with rank). ``relevance`` maps doc id ->
    graded or binary label (missing = 0; labels > 0 count as relevant, value 1). Scores
    are min-max normalised over the whole request to [0, 1]. ``embeddings`` maps doc id ->
    vector, or is a (U, d) array in first-seen order; cosine similarities are computed
    from them.
    """
    if not ranked or all(len(r) == 0 for r in ranked):
        raise QrlibError("make_request: need at least one non-empty ranked list")
    ids: dict[str, int] = {}
    rows: list[list[int]] = []
    srows: list[list[float]] = []
    for lst in ranked:
        row, srow = [], []
        seen: set[str] = set()
        for j, item in enumerate(lst):
            did, sc = (item if isinstance(item, (tuple, list)) else (item, -float(j)))
            did = str(did)
            if did in seen:
                continue
            seen.add(did)
            row.append(ids.setdefault(did, len(ids)))
            srow.append(float(sc))
        rows.append(row)
        srows.append(srow)
    K, N, U = len(rows), max(len(r) for r in rows), len(ids)
    lists = np.full((K, N), U, dtype=np.int64)
    scores = np.zeros((K, N))
    allsc = np.array([s for r in srows for s in r], dtype=float)
    lo, hi = float(allsc.min()), float(allsc.max())
    for i, (row, srow) in enumerate(zip(rows, srows)):
        lists[i, :len(row)] = row
        scores[i, :len(srow)] = (np.array(srow) - lo) / (hi - lo) if hi > lo else 1.0
    doc_ids = tuple(sorted(ids, key=ids.__getitem__))
    rel = np.array([1.0 if float(relevance.get(d, 0)) > 0 else 0.0 for d in doc_ids])
    sim = None
    if embeddings is not None:
        if isinstance(embeddings, np.ndarray):
            emb = np.asarray(embeddings, dtype=float)
        else:
            emb = np.stack([np.asarray(embeddings[d], dtype=float) for d in doc_ids])
        if emb.shape[0] != U:
            raise QrlibError(f"make_request: {emb.shape[0]} embeddings for {U} documents")
        emb = emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)
        sim = np.clip(emb @ emb.T, -1.0, 1.0)
    par = np.full(K, -1, dtype=np.int64) if parent is None else np.asarray(parent, np.int64)
    if par.shape != (K,) or np.any(par >= K) or np.any(par == np.arange(K)):
        raise QrlibError("make_request: parent must give one arm index (< K, not itself) "
                         "or -1 per ranked list")
    kids = par >= 0
    if kids.any() and np.any(par[par[kids]] >= 0):
        raise QrlibError("make_request: only two levels are supported (a parent has no parent)")
    return Request(lists, rel, scores, sim, par, doc_ids, tuple(queries))


# =========================================================================== policies
@dataclass(frozen=True)
class Policy:
    """A row of Table 1. ``select``: how the arm is chosen (``random`` = uniform arm and
    uniform unread rank; ``rank`` = uniform arm, next rank; ``egreedy``; ``beta`` =
    Thompson sampling on Beta posteriors, Algorithm 1; ``gaussian`` = Thompson sampling on
    Gaussian posteriors, Algorithm 2). ``reward``: the Table 1 reward fed to the update.

    ``epsilon`` (``egreedy`` only) is a reading of our own. Table 1 writes the rule as
    "pull the same arm again when its last document was relevant, else a uniformly
    random arm" and gives no exploration rate; that literal rule is ``epsilon=0``. The
    default 0.1 adds the exploration the name ε-greedy implies: after a relevant
    document a uniformly random arm (possibly the same one) is drawn with probability
    epsilon, so the arm is kept with probability 1 - epsilon (K - 1) / K (0.95 for two
    arms, 0.925 for four). After an irrelevant document both readings draw uniformly.
    """

    name: str
    label: str
    select: str
    reward: str = "bernoulli"
    k: int = 3          # top-k window (Bernoulli top-k, Eq. 1)
    c: float = 0.01     # UCB weight, "c -> 0" in Table 1 / Eq. 1
    a: float = 5.0      # diversity-concave (Table 1: a = 5)
    b: float = 15.0     # diversity-concave (Table 1: b = 15)
    epsilon: float = 0.1  # epsilon-greedy: chance of a random arm after a relevant doc (ours)
    explore_all: bool = False  # UCB family: untried arms first (bonus -> inf as n -> 0)
    params: dict[str, Any] = field(default_factory=dict)


POLICIES: dict[str, Policy] = {p.name: p for p in [
    Policy("random", "Random", "random"),
    Policy("rank", "Random rank-aware", "rank"),
    Policy("egreedy", "ε-greedy", "egreedy"),
    Policy("bernoulli", "Bernoulli", "beta", "bernoulli"),
    Policy("bernoulli_ucb", "Bernoulli UCB", "beta", "ucb", explore_all=True),
    Policy("bernoulli_top3", "Bernoulli top-k=3", "beta", "topk", k=3),
    Policy("bernoulli_top4", "Bernoulli top-k=4", "beta", "topk", k=4),
    Policy("bernoulli_top5", "Bernoulli top-k=5", "beta", "topk", k=5),
    Policy("bernoulli_rank", "Bernoulli rank-aware", "beta", "rank"),
    Policy("gaussian", "Gaussian (scores)", "gaussian", "score"),
    Policy("diversity", "Diversity", "beta", "diversity"),
    Policy("diversity_concave", "Diversity concave", "beta", "concave"),
    Policy("topk_ucb_div", "Top-k UCB diversity (Eq. 1)", "beta", "topk_ucb_div", k=3,
           explore_all=True),
]}
PAPER_ORDER = list(POLICIES)


# =========================================================================== pure rewards
def reward_bernoulli(rel: np.ndarray) -> np.ndarray:
    """Table 1, "Bernoulli": r(a_t, n) = Relevance(d_{a_t,n})."""
    return np.asarray(rel, dtype=float)


def ucb_bonus(n: np.ndarray, c: float) -> np.ndarray:
    """Exploration term of Table 1 / Eq. 1: c * sqrt(log2(n + 1) / n), n >= 1 the rank."""
    n = np.asarray(n, dtype=float)
    return c * np.sqrt(np.log2(n + 1.0) / n)


def reward_ucb(rel: np.ndarray, n: np.ndarray, c: float) -> np.ndarray:
    """Table 1, "Bernoulli UCB": Relevance(d_{a_t,n}) + c * sqrt(log2(n+1)/n)."""
    return np.asarray(rel, dtype=float) + ucb_bonus(n, c)


def topk_window(rel_list: np.ndarray, k: int) -> np.ndarray:
    """(1/k) * sum_{i=n}^{n+k-1} Relevance(d_{a,i}) for every start n of each list
    (Table 1, "Bernoulli top-k"); positions past the list count 0. ``rel_list``: (K, N)."""
    rel_list = np.asarray(rel_list, dtype=float)
    K, N = rel_list.shape
    pad = np.concatenate([rel_list, np.zeros((K, k))], axis=1)
    cs = np.concatenate([np.zeros((K, 1)), np.cumsum(pad, axis=1)], axis=1)
    return (cs[:, k:k + N] - cs[:, :N]) / k


def reward_topk(window_mean: np.ndarray) -> np.ndarray:
    """Table 1, "Bernoulli top-k": the top-k window mean at the pulled rank."""
    return np.asarray(window_mean, dtype=float)


def reward_rank_aware(rel: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Table 1, "Bernoulli rank-aware": Relevance(d_{a_t,n}) / log2(n + 2), n the 1-based
    rank (n = min{j in 1..N : (a_t, j) not observed})."""
    return np.asarray(rel, dtype=float) / np.log2(np.asarray(n, dtype=float) + 2.0)


def novelty(max_cos: np.ndarray) -> np.ndarray:
    """Sec. 3.3: 1 - (max_{(i,j) in O} cos(d_{a_t,n}, d_{i,j}) + 1) / 2. With nothing
    observed yet, pass max_cos = -1 (novelty 1)."""
    return 1.0 - (np.asarray(max_cos, dtype=float) + 1.0) / 2.0


def reward_diversity(rel: np.ndarray, max_cos: np.ndarray) -> np.ndarray:
    """Table 1, "Diversity": Relevance * novelty(max cos to the observed set)."""
    return np.asarray(rel, dtype=float) * novelty(max_cos)


def reward_diversity_concave(rel: np.ndarray, max_cos: np.ndarray, a: float = 5.0,
                             b: float = 15.0) -> np.ndarray:
    """Table 1, "Diversity concave": Relevance * (1 if max cos < 0 else
    exp(-a * (max cos)^b)), a = 5, b = 15 (Sec. 4.3): only near-duplicates are damped."""
    m = np.asarray(max_cos, dtype=float)
    damp = np.where(m < 0, 1.0, np.exp(-a * np.clip(m, 0.0, 1.0) ** b))
    return np.asarray(rel, dtype=float) * damp


def reward_topk_ucb_diversity(window_mean: np.ndarray, max_cos: np.ndarray, n: np.ndarray,
                              c: float) -> np.ndarray:
    """Eq. 1: (1/k) sum_{i=n}^{n+k-1} Relevance(d_{a_t,i}) * novelty + c*sqrt(log2(n+1)/n)."""
    return np.asarray(window_mean, dtype=float) * novelty(max_cos) + ucb_bonus(n, c)


# =========================================================================== pure updates
def beta_update(alpha: np.ndarray, beta: np.ndarray,
                r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 1, line 12: alpha += r, beta += 1 - r. Fractional rewards (top-k,
    diversity) are allowed; 1 - r is floored at 0 so a UCB bonus cannot shrink beta."""
    r = np.asarray(r, dtype=float)
    return alpha + r, beta + np.maximum(1.0 - r, 0.0)


def gaussian_posterior(sum_r: np.ndarray, n: np.ndarray, mu0: float = 0.0,
                       var0: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 2, lines 11-12 (unit observation noise): var = (1/var0 + n)^-1,
    mu = var * (mu0/var0 + sum of rewards). Returns (mu, std)."""
    var = 1.0 / (1.0 / var0 + np.asarray(n, dtype=float))
    return var * (mu0 / var0 + np.asarray(sum_r, dtype=float)), np.sqrt(var)


def should_expand(alpha: np.ndarray, beta: np.ndarray, pulls: np.ndarray, n_min: int = 4,
                  tau: float = 0.77) -> np.ndarray:
    """Sec. 3.4: a parent is informative when observed >= n times and
    E[q_i] = alpha / (alpha + beta) > tau (Sec. 5.3: n = 4, tau = 0.77)."""
    return (np.asarray(pulls) >= n_min) & (alpha / (alpha + beta) > tau)


def inherit_prior(alpha: np.ndarray, beta: np.ndarray,
                  lam: float = 0.91) -> tuple[np.ndarray, np.ndarray]:
    """Sec. 3.4: a child of a parent with Beta(alpha, beta) starts at
    Beta(lambda*alpha, lambda*beta), lambda in (0, 1] (Sec. 5.3: 0.91)."""
    if not 0.0 < lam <= 1.0:
        raise QrlibError(f"inheritance factor lambda must be in (0, 1], got {lam}")
    return lam * np.asarray(alpha, float), lam * np.asarray(beta, float)


# =========================================================================== simulation
def _policy(p: Policy | str) -> Policy:
    if isinstance(p, Policy):
        return p
    if p not in POLICIES:
        raise QrlibError(f"unknown bandit policy {p!r}; accepted: {PAPER_ORDER}")
    return POLICIES[p]


def simulate(req: Request, policy: Policy | str, reps: int = 1000, *,
             seed: int | Sequence[int] | np.random.Generator = 0,
             hierarchical: bool = False, n_min: int = 4, tau: float = 0.77,
             lam: float = 0.91) -> np.ndarray:
    """Run ``reps`` independent repetitions of ``policy`` on ``req`` until every pooled
    document is selected; return the selection order, an (R, U) int array of local
    document indices (row r, column t = document chosen at step t).

    ``hierarchical``: only arms without a parent start active; children of a parent are
    activated with inherited priors once :func:`should_expand` holds for the parent (the
    rule is read on the Beta posterior that every policy keeps). If no active arm has an
    unread document left, the remaining children are released (so 100 % budget still
    covers the pool). With ``hierarchical=False`` all arms are active with Beta(1, 1).
    """
    pol = _policy(policy)
    if reps < 1:
        raise QrlibError(f"simulate: reps must be >= 1, got {reps}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    K, N = req.lists.shape
    U = req.n_docs
    R = int(reps)
    L = np.concatenate([req.lists, np.full((K, 1), U)], axis=1)        # (K, N+1)
    rel_ext = np.append(req.rel, 0.0)
    rel_list = rel_ext[req.lists]                                      # (K, N)
    win = topk_window(rel_list, pol.k) if pol.reward in ("topk", "topk_ucb_div") else None
    sim_ext = None
    if req.sim is not None and pol.reward in ("diversity", "concave", "topk_ucb_div"):
        sim_ext = np.full((U + 1, U), -1.0)
        sim_ext[:U] = req.sim
    rows = np.arange(R)
    karr = np.arange(K)[None, :]

    sel = np.zeros((R, U + 1), dtype=bool)
    sel[:, U] = True
    ptr = np.zeros((R, K), dtype=np.int64)
    alpha = np.ones((R, K))
    beta = np.ones((R, K))
    pulls = np.zeros((R, K), dtype=np.int64)
    gsum = np.zeros((R, K))
    maxcos = np.full((R, U), -1.0)
    last_arm = np.full(R, -1)
    last_rel = np.zeros(R)
    order = np.empty((R, U), dtype=np.int64)
    children = np.flatnonzero(req.parent >= 0)
    par_of = req.parent[children]
    if hierarchical and children.size:
        active = np.broadcast_to(req.parent < 0, (R, K)).copy()
    else:
        active = np.ones((R, K), dtype=bool)

    for t in range(U):
        # skip documents already selected through another arm (never observed twice)
        cur = L[karr, ptr]
        blocked = sel[rows[:, None], cur] & (ptr < N)
        while blocked.any():
            ptr += blocked
            cur = L[karr, ptr]
            blocked = sel[rows[:, None], cur] & (ptr < N)
        has_doc = ptr < N
        avail = has_doc & active
        if hierarchical and children.size:
            stuck = ~avail.any(axis=1)
            if stuck.any():  # release the remaining children with inherited priors
                newc = stuck[:, None] & ~active[:, children]
                pa, pb = inherit_prior(alpha[:, par_of], beta[:, par_of], lam)
                alpha[:, children] = np.where(newc, pa, alpha[:, children])
                beta[:, children] = np.where(newc, pb, beta[:, children])
                active[:, children] |= newc
                avail = has_doc & active
        # ---- choose an arm
        u = rng.random((R, K))
        if pol.select in ("random", "rank"):
            a = np.argmax(np.where(avail, u, -1.0), axis=1)
        elif pol.select == "egreedy":
            rand_arm = np.argmax(np.where(avail, u, -1.0), axis=1)
            prev = np.maximum(last_arm, 0)
            stay = ((last_arm >= 0) & (last_rel > 0) & avail[rows, prev]
                    & (rng.random(R) >= pol.epsilon))
            a = np.where(stay, prev, rand_arm)
        elif pol.select == "beta":
            theta = rng.beta(alpha, beta)
            if pol.explore_all:
                theta = np.where(pulls == 0, 2.0 + u, theta)
            a = np.argmax(np.where(avail, theta, -np.inf), axis=1)
        elif pol.select == "gaussian":
            mu, sd = gaussian_posterior(gsum, pulls)
            theta = mu + sd * rng.standard_normal((R, K))
            a = np.argmax(np.where(avail, theta, -np.inf), axis=1)
        else:
            raise QrlibError(f"policy {pol.name}: unknown select {pol.select!r}")
        # ---- which document of the arm
        if pol.select == "random":  # uniform over the arm's unread ranks (Table 1, row 1)
            cand = L[a, :N]                                            # (R, N)
            ok = ~sel[rows[:, None], cand]
            pos = np.argmax(np.where(ok, rng.random((R, N)), -1.0), axis=1)
        else:
            pos = ptr[rows, a]
        d = L[a, pos]
        order[:, t] = d
        r_rel = rel_ext[d]
        n = pos + 1
        mc = maxcos[rows, np.minimum(d, U - 1)] if sim_ext is not None else np.full(R, -1.0)
        # ---- reward (Table 1 / Eq. 1)
        if pol.reward == "bernoulli":
            r = reward_bernoulli(r_rel)
        elif pol.reward == "ucb":
            r = reward_ucb(r_rel, n, pol.c)
        elif pol.reward == "topk":
            r = reward_topk(win[a, pos])
        elif pol.reward == "rank":
            r = reward_rank_aware(r_rel, n)
        elif pol.reward == "diversity":
            r = reward_diversity(r_rel, mc)
        elif pol.reward == "concave":
            r = reward_diversity_concave(r_rel, mc, pol.a, pol.b)
        elif pol.reward == "topk_ucb_div":
            r = reward_topk_ucb_diversity(win[a, pos], mc, n, pol.c)
        elif pol.reward == "score":
            r = req.scores[a, pos]
        else:
            raise QrlibError(f"policy {pol.name}: unknown reward {pol.reward!r}")
        # ---- update state
        sel[rows, d] = True
        na, nb = beta_update(alpha[rows, a], beta[rows, a], np.clip(r, 0.0, None))
        alpha[rows, a] = na
        beta[rows, a] = nb
        pulls[rows, a] += 1
        gsum[rows, a] += r
        last_arm, last_rel = a, r_rel
        if sim_ext is not None:
            np.maximum(maxcos, sim_ext[d], out=maxcos)
        if hierarchical and children.size:
            ready = should_expand(alpha[:, par_of], beta[:, par_of], pulls[:, par_of],
                                  n_min, tau)
            newc = ready & ~active[:, children]
            if newc.any():
                pa, pb = inherit_prior(alpha[:, par_of], beta[:, par_of], lam)
                alpha[:, children] = np.where(newc, pa, alpha[:, children])
                beta[:, children] = np.where(newc, pb, beta[:, children])
                active[:, children] |= newc
    return order


# =========================================================================== metrics
def budget_counts(n_docs: int, budgets: Sequence[float]) -> np.ndarray:
    """Number of documents for each budget fraction: ceil(b * U), at least 1
    (Sec. 4.3: b in {10 %, ..., 100 %} of the pooled documents)."""
    b = np.asarray(budgets, dtype=float)
    if np.any(b <= 0) or np.any(b > 1):
        raise QrlibError(f"budgets must be fractions in (0, 1], got {list(budgets)}")
    return np.maximum(1, np.ceil(b * n_docs - 1e-9)).astype(int)


def precision_recall(order: np.ndarray, rel: np.ndarray,
                     budgets: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """Precision and recall of the first ceil(b*U) selected documents, per repetition:
    (R, len(budgets)) arrays. Recall is w.r.t. the relevant documents in the pool (the
    paper's Figures 10-11); NaN when the pool holds none."""
    rel = np.asarray(rel, dtype=float)
    cum = np.cumsum(rel[order], axis=1)                                # (R, U)
    cnt = budget_counts(order.shape[1], budgets)
    hits = cum[:, cnt - 1]
    prec = hits / cnt[None, :]
    total = rel.sum()
    rec = hits / total if total > 0 else np.full_like(hits, np.nan)
    return prec, rec


def mean_ci(x: np.ndarray, axis: int = 0, z: float = 1.96) -> tuple[np.ndarray, np.ndarray]:
    """Mean and half-width of the normal-approximation 95 % confidence interval (NaN-aware)."""
    x = np.asarray(x, dtype=float)
    n = np.sum(~np.isnan(x), axis=axis)
    m = np.nanmean(x, axis=axis)
    sd = np.nanstd(x, axis=axis, ddof=1) if np.all(n > 1) else np.zeros_like(m)
    return m, z * sd / np.sqrt(np.maximum(n, 1))


def subtopic_qrels(req: Request) -> dict[str, dict[str, int]]:
    """Subtopics for alpha-nDCG: subtopic i = the relevant documents in sub-query i's
    ranked list (a relevant document found by several sub-queries covers several
    subtopics). Returns {subtopic_id: {doc_id: 1}}."""
    out: dict[str, dict[str, int]] = {}
    for i, row in enumerate(req.lists):
        docs = {req.doc_ids[d]: 1 for d in row if d < req.n_docs and req.rel[d] > 0}
        if docs:
            out[str(i)] = docs
    return out


def alpha_ndcg(orders: Mapping[str, np.ndarray], reqs: Mapping[str, Request],
               cutoffs: Sequence[int] = (5, 10, 20), alpha: float = 0.5) -> dict[str, np.ndarray]:
    """alpha-nDCG@K (Clarke et al. 2008; the paper's Tables 3 and 5) of the selection
    order, computed by ir-measures' pyndeval provider through :func:`qrlib.eval.metrics.evaluate`
    with subtopics from :func:`subtopic_qrels`. ``orders[key]`` is an (R, U) order for
    request ``reqs[key]``. Repetitions sharing the same top-max(K) prefix are evaluated
    once. Returns {key: (R, len(cutoffs)) array}; requests without subtopics get NaN."""
    names = [f"alpha_nDCG(alpha={alpha})@{k}" for k in cutoffs]
    kmax = max(cutoffs)
    run: dict[str, list[tuple[str, float]]] = {}
    qrels: dict[str, dict[str, int]] = {}
    subs: dict[str, dict[str, dict[str, int]]] = {}
    index: dict[str, tuple[np.ndarray, list[str]]] = {}
    for key, order in orders.items():
        req = reqs[key]
        st = subtopic_qrels(req)
        if not st:
            continue
        uniq, inv = np.unique(order[:, :kmax], axis=0, return_inverse=True)
        qids = [f"{key}#{j}" for j in range(len(uniq))]
        index[key] = (np.asarray(inv).reshape(-1), qids)
        gold = {d: 1 for docs in st.values() for d in docs}
        for qid, row in zip(qids, uniq):
            run[qid] = [(req.doc_ids[d], float(kmax - j)) for j, d in enumerate(row)]
            qrels[qid] = gold
            subs[qid] = st
    out: dict[str, np.ndarray] = {}
    df = None
    if run:
        df = evaluate(run, qrels, names, per_query=True, subtopic_qrels=subs)
        df = df.set_index("query_id")
    for key, order in orders.items():
        if key not in index:
            out[key] = np.full((order.shape[0], len(cutoffs)), np.nan)
            continue
        inv, qids = index[key]
        out[key] = df.loc[qids, names].to_numpy(dtype=float)[inv]
    return out
