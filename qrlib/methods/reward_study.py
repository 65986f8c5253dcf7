"""The reward-shaping study of notebook 04: every paper's reward on the same
pseudo-rollouts.

* :func:`plot_reward_shapes`: ACQO's rank score (Eq. 3, 10) and decay (Eq. 4),
  DeepRetrieval's recall and answer-rank tiers (Table 8), as pure functions;
* :func:`pseudo_rollouts` and :func:`wrap`: a group of perturbed queries per real query,
  written in each method's output format (some broken on purpose);
* :data:`REWARDS` / :func:`compared_rewards`, :func:`score_rollouts`, :func:`reward_stats`,
  :func:`plot_reward_histograms`: every reward through :class:`~qrlib.rl.env.RewardEnv` and
  the share of GRPO groups without reward spread;
* :func:`sage_worked_group`: one SAGE group through SCS (Eq. 1), CRS (Eq. 2) and the copy
  penalty (Eq. 3); :func:`copy_penalty_table` and :func:`plot_copy_penalty`;
* :func:`grpo_advantage` and :func:`open_readings`: what the readings the papers leave open
  change (ACQO Eq. 4-5, RL-QR's [theta, 1], the bandit paper's epsilon);
* :func:`key_numbers` and :func:`findings`.

A study across the papers' rewards: it sits beside the paper folders (not in a shared
layer) because it imports every paper's reward module.
"""
from __future__ import annotations

import json
import random
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from qrlib.eval.prose import paragraph, spread
from qrlib.rl import rewards as R


# =========================================================================== 1. shapes
def plot_reward_shapes() -> Any:
    """Four panels: ACQO's Phi and Phi' (lambda = 1, k* = 3), the eta-decay of Eq. 4 for
    eta in {0.6, 0.8, 1}, DeepRetrieval's recall tiers and answer-rank tiers."""
    import matplotlib.pyplot as plt

    from qrlib.methods.acqo import rewards as R_acqo
    from qrlib.methods.deepretrieval import rewards as R_dr

    fig, axes = plt.subplots(1, 4, figsize=(17, 3.6))
    r = np.arange(1, 121)
    axes[0].plot(r, [R_acqo.phi(x) for x in r], label=r"$\Phi(r)$ (Eq. 3)")
    axes[0].plot(r, [R_acqo.phi_prime(x, lam=1.0, k_star=3) for x in r], "--",
                 label=r"$\Phi'(r)$, $\lambda=1, k^*=3$ (Eq. 10)")
    axes[0].set_xscale("log"); axes[0].set_xlabel("rank r"); axes[0].legend(fontsize=8)
    axes[0].set_title("ACQO rank score")
    i = np.arange(1, 7)
    for eta in (0.6, 0.8, 1.0):
        axes[1].plot(i, [eta ** j * R_acqo.phi(1) for j in i], "o-", label=f"eta={eta}")
    axes[1].set_xlabel("i (i-th gold document, all at rank 1)")
    axes[1].set_ylabel(r"$\eta^i\Phi(1)$"); axes[1].legend(fontsize=8)
    axes[1].set_title("ACQO decay (Eq. 4)")
    rec = np.linspace(0, 1, 401)
    axes[2].step(rec, [R_dr.recall_tier_reward(x) for x in rec], where="post")
    axes[2].set_xlabel("recall@K"); axes[2].set_title("DeepRetrieval recall tiers")
    ranks = np.unique(np.logspace(0, np.log10(5000), 300).astype(int))
    axes[3].step(ranks, [R_dr.answer_rank_tier_reward(x) for x in ranks], where="post")
    axes[3].set_xscale("log"); axes[3].set_xlabel("rank of first answer hit")
    axes[3].set_title("DeepRetrieval answer-rank tiers")
    fig.tight_layout()
    return fig


# =========================================================================== 2. rollouts
OP_STRATEGY = {"copy": 4, "drop30": 4, "keywords": 4, "shuffle": 3, "truncate": 4, "noise": 2,
               "prf": 1, "split2": 3}   # perturbation -> the SAGE strategy it resembles


def pseudo_rollouts(ds: Any, ret: Any, group_size: int, p_malformed: float,
                    seed: int) -> pd.DataFrame:
    """``group_size`` perturbations per query of ``ds`` (the first a verbatim copy, the
    others drawn from :data:`OP_STRATEGY`: drop 30 % of the words, keep the 3 longest, shuffle,
    truncate to half, add 3 words of other queries, add 6 words of a top-3 ``ret`` document
    (pseudo-relevance feedback), split in two sub-queries). Columns: ``qid``, ``op``,
    ``strategy``, ``parts`` (sub-queries as word lists) and ``broken`` (drawn with
    probability ``p_malformed``). One ``random.Random(seed)`` draws everything."""
    rng = random.Random(seed)
    qids = sorted(ds.queries)
    first_docs = dict(zip(qids, ret.search([ds.queries[q] for q in qids], 3)))
    all_words = [w for q in qids for w in ds.queries[q].split()]

    def prf_words(q: str, n: int = 6) -> list[str]:
        if not first_docs[q]:
            return []
        words = ds.doc_text(rng.choice(first_docs[q])[0]).split()[:60]
        return rng.sample(words, min(n, len(words)))

    half = lambda w: max(1, len(w) // 2)  # noqa: E731
    ops = {
        "copy": lambda w, q: [w],
        "drop30": lambda w, q: [[x for x in w if rng.random() > 0.3] or w[:1]],
        "keywords": lambda w, q: [sorted(w, key=len, reverse=True)[:3]],
        "shuffle": lambda w, q: [rng.sample(w, len(w))],
        "truncate": lambda w, q: [w[:half(w)]],
        "noise": lambda w, q: [w + rng.sample(all_words, 3)],
        "prf": lambda w, q: [w + prf_words(q)],
        "split2": lambda w, q: [w[:half(w)], w[half(w):] or w],
    }
    rows = []
    for q in qids:
        words = ds.queries[q].split()
        for op in ["copy"] + [rng.choice(list(ops)) for _ in range(group_size - 1)]:
            rows.append({"qid": q, "op": op, "strategy": OP_STRATEGY[op],
                         "parts": ops[op](words, q), "broken": rng.random() < p_malformed})
    return pd.DataFrame(rows)


def wrap(parts: Sequence[Sequence[str]], fmt: str, strategy: int, broken: bool) -> str:
    """One completion in a method's output format (``acqo``: JSON with ``%%``-joined
    sub-queries; ``deepretrieval``: think + answer tags; ``sage``: the strategy in think
    and JSON; otherwise answer tags), broken on purpose when ``broken``."""
    joined = " ".join(" ".join(p) for p in parts)
    if fmt == "acqo":
        body = json.dumps({"query": "%%".join(" ".join(p) for p in parts)})
        return body[:-3] if broken else body
    if fmt == "deepretrieval":
        ans = json.dumps({"query": joined})
        return (f"<think>rewrite</think><answer>{ans}" if broken
                else f"<think>rewrite</think><answer>{ans}</answer>")
    if fmt == "sage":
        body = json.dumps({"query": joined, "strategy": strategy})
        return f"<think>s{strategy}</think><answer>{body[:-2] if broken else body}</answer>"
    # plain / RL-QR: answer tags, sometimes chatty text around them
    return (f"Here you go: {joined}" if broken else f"<answer>{joined}</answer>")


def completions(roll: pd.DataFrame, fmt: str) -> list[str]:
    """Every rollout of ``roll`` written with :func:`wrap` in format ``fmt``."""
    return [wrap(p, fmt, s, b) for p, s, b in zip(roll.parts, roll.strategy, roll.broken)]


# =========================================================================== 3. scoring
def compared_rewards(k: int) -> dict[str, tuple[str, str, dict[str, Any]]]:
    """The rewards compared, ``{label: (registered reward, completion format, params)}``,
    with the papers' parameters where they give them (ACQO's HotpotQA eta = 0.6, Stage II
    k* = 3, SAGE p = 0.05, RL-QR nDCG@3) and nDCG@``k`` elsewhere."""
    return {
        "ndcg@10": ("ndcg", "plain", {"k": k}),
        "DeepRetrieval nDCG+format": ("deepretrieval_ndcg", "deepretrieval", {"k": k}),
        "DeepRetrieval recall tiers": ("deepretrieval_recall", "deepretrieval", {"k": 100}),
        "DeepRetrieval answer-rank tiers": ("deepretrieval_answer_rank", "deepretrieval", {}),
        "ACQO Stage I": ("acqo_stage1", "acqo", {"eta": 0.6}),
        "ACQO Stage II": ("acqo_stage2", "acqo", {"eta": 0.6, "lam": 1.0, "k_star": 3}),
        "SAGE direct": ("sage_direct", "sage", {"k": k, "p": 0.05}),
        "SAGE SCS": ("sage_scs", "sage", {"k": k, "p": 0.05}),
        "SAGE CRS": ("sage_crs", "sage", {"k": k, "p": 0.05}),
        "RL-QR": ("rlqr", "plain", {"k": 3}),
    }


def score_rollouts(roll: pd.DataFrame, ds: Any, ret: Any,
                   rewards: Mapping[str, tuple[str, str, Mapping[str, Any]]]
                   ) -> tuple[pd.DataFrame, dict[str, float], dict[str, Any]]:
    """Score every rollout with every reward, each through its own
    :class:`~qrlib.rl.env.RewardEnv` called as TRL calls a reward function. Returns the
    scores (one column per reward, plus ``qid`` and ``op``), seconds per rollout and the
    environments (their ``records_frame()`` holds the parts of each reward)."""
    from qrlib.rl.env import RewardEnv

    qcol = [ds.queries[q] for q in roll.qid]
    scores, timings, envs = {}, {}, {}
    for label, (name, fmt, params) in rewards.items():
        comps = completions(roll, fmt)
        env = RewardEnv(ret, ds.qrels, reward=name, fmt=fmt, queries=ds.queries, **params)
        t0 = time.perf_counter()
        scores[label] = env(prompts=None, completions=comps, qid=list(roll.qid), query=qcol)
        timings[label] = (time.perf_counter() - t0) / len(comps)
        envs[label] = env
    sc = pd.DataFrame(scores)
    sc["qid"], sc["op"] = roll.qid.values, roll.op.values
    return sc, timings, envs


def reward_stats(sc: pd.DataFrame, labels: Sequence[str],
                 timings: Mapping[str, float]) -> pd.DataFrame:
    """Per reward: mean, std, min, max, share below 0, mean within-group std, the share of
    groups whose rewards are all equal (``frac_reward_zero_std``: no GRPO gradient) and
    milliseconds per rollout."""
    cols = list(labels)

    def zero_std_share(col: str) -> float:
        return sc.groupby("qid")[col].agg(lambda v: R.reward_variance_zero(v)).mean()

    return pd.DataFrame({
        "mean": sc[cols].mean(), "std": sc[cols].std(),
        "min": sc[cols].min(), "max": sc[cols].max(),
        "share < 0": (sc[cols] < 0).mean(),
        "mean within-group std": sc.groupby("qid")[cols].std(ddof=0).mean(),
        "frac_reward_zero_std": pd.Series({c: zero_std_share(c) for c in cols}),
        "ms per rollout": pd.Series(timings) * 1e3,
    })


def plot_reward_histograms(sc: pd.DataFrame, labels: Sequence[str], stats: pd.DataFrame) -> Any:
    """One histogram per reward (2 x 5 panels), titled with its share of zero-std groups."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 5, figsize=(18, 6.5))
    for ax, label in zip(axes.ravel(), labels):
        ax.hist(sc[label], bins=30, color="C0")
        ax.set_title(f"{label}\nzero-std groups: {stats.loc[label, 'frac_reward_zero_std']:.0%}",
                     fontsize=9)
    fig.tight_layout()
    return fig


# =========================================================================== 4-5. SAGE
WORKED_COLUMNS = ["op", "queries", "format_ok", "strategy", "part_ndcg", "strategy mean nDCG",
                  "strategy rank", "SCS (Eq. 1)", "CRS (Eq. 2)", "copy",
                  "final SCS reward (Eq. 3, p=0.05)"]


def sage_worked_group(env_scs: Any, roll: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    """The query whose rollouts have the most distinct nDCG@10 values, and its group worked
    through SAGE: each strategy's mean nDCG and rank, SCS = nDCG / rank (Eq. 1), CRS = nDCG
    - group median (Eq. 2), the copy flag and the final SCS reward with the copy penalty
    (Eq. 3). ``env_scs`` is the SCS environment that scored ``roll``."""
    from qrlib.methods.sage import rewards as R_sage

    rec = env_scs.records_frame()
    rec["op"] = roll.op.values
    var = rec.groupby("qid")["part_ndcg"].agg(lambda v: v.nunique())
    pick = var.idxmax()
    g = rec[rec.qid == pick].copy()
    strats = [None if pd.isna(s) else int(s) for s in g.strategy]
    ranks = R_sage.strategy_ranks(list(g.part_ndcg), strats)
    means = {s: np.mean([v for v, t in zip(g.part_ndcg, strats) if t == s]) for s in set(strats)}
    g["strategy"] = pd.array(strats, dtype="Int64")
    g["strategy mean nDCG"] = [means[s] for s in strats]
    g["strategy rank"] = [ranks[s] for s in strats]
    g["SCS (Eq. 1)"] = g["part_shaped"]
    g["CRS (Eq. 2)"] = R_sage.sage_crs(list(g.part_ndcg))
    g["copy"] = g["part_copy"].astype(bool)
    g["final SCS reward (Eq. 3, p=0.05)"] = g["reward"]
    worked = g[WORKED_COLUMNS].rename(columns={"part_ndcg": "nDCG@10"}).reset_index(drop=True)
    return pick, worked


def copy_penalty_table(ret: Any, ds: Any, roll: pd.DataFrame, k: int,
                       penalties: Sequence[float]) -> pd.DataFrame:
    """For each copy penalty ``p`` of SAGE's direct reward: the share of groups in which a
    verbatim copy is among the best-rewarded rollouts (ties included), the mean GRPO
    advantage of copies, ``(r - mean) / (std + 1e-4)`` within the group, and the mean
    reward of copies and of rewrites."""
    from qrlib.rl.env import RewardEnv

    qcol = [ds.queries[q] for q in roll.qid]
    comps = completions(roll, "sage")
    rows = []
    for p in penalties:
        env_p = RewardEnv(ret, ds.qrels, reward="sage_direct", fmt="sage", queries=ds.queries,
                          k=k, p=p)
        rw = np.array(env_p(None, comps, qid=list(roll.qid), query=qcol))
        rec = env_p.records_frame()
        rec["r"] = rw
        best_is_copy, copy_adv = [], []
        for q, grp in rec.groupby("qid"):
            top = grp.r.max()
            best_is_copy.append(bool(((grp.r >= top - 1e-12) & (grp.part_copy > 0)).any()))
            adv = (grp.r - grp.r.mean()) / (grp.r.std(ddof=0) + 1e-4)
            copy_adv += list(adv[grp.part_copy > 0])
        rows.append({"p": p, "share of groups where a copy is a top rollout": np.mean(best_is_copy),
                     "mean GRPO advantage of copies": float(np.mean(copy_adv)),
                     "mean reward of copies": rec.r[rec.part_copy > 0].mean(),
                     "mean reward of rewrites": rec.r[rec.part_copy == 0].mean()})
    return pd.DataFrame(rows)


def plot_copy_penalty(copy_tab: pd.DataFrame) -> Any:
    """The mean GRPO advantage of copy rollouts against the copy penalty p."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.4))
    ax.plot(copy_tab.p, copy_tab["mean GRPO advantage of copies"], "o-")
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xlabel("copy penalty p"); ax.set_ylabel("mean advantage of copy rollouts")
    return fig


# =========================================================================== 6. open readings
def grpo_advantage(r: Sequence[float], groups: Sequence[Any]) -> np.ndarray:
    """``(r - group mean) / (group std + 1e-4)`` per rollout (population std), as GRPO
    normalises rewards within a group."""
    r = pd.Series(np.asarray(r, dtype=float))
    g = r.groupby(np.asarray(groups))
    return ((r - g.transform("mean")) / (g.transform(lambda v: v.std(ddof=0)) + 1e-4)).to_numpy()


def _nan_mean(x: np.ndarray, mask: np.ndarray) -> float:
    return float(x[mask].mean()) if mask.any() else float("nan")


def acqo_readings(rec: pd.DataFrame, params: Mapping[str, Any]) -> list[dict[str, Any]]:
    """ACQO Eq. 4-5 read two ways (decay from i = 1 or i = 0) with delta in {-0.1, -1}, on
    the Stage II records ``rec``: the mean well-formed reward, the mean advantage of broken
    rollouts and of zero-reward rollouts that share a group with a broken one."""
    from qrlib.methods.acqo import rewards as R_acqo

    bad = ~rec.format_ok.to_numpy(dtype=bool)
    with_bad = pd.Series(bad).groupby(rec.qid.to_numpy()).transform("any").to_numpy()
    rows = []
    for first_index in (1, 0):
        for delta in (-0.1, -1.0):
            r = np.asarray([R_acqo.acqo_score(g, ok, eta=params["eta"], lam=params["lam"],
                                              k_star=params["k_star"], delta=delta,
                                              first_index=first_index)
                            for g, ok in zip(rec.gold_ranks, rec.format_ok)])
            adv = grpo_advantage(r, rec.qid)
            row = {"reading": "ACQO Eq. 4-5", "choice": f"first index {first_index}, delta {delta:g}"}
            rows += [
                {**row, "measure": "mean reward, well-formed", "value": float(np.mean(r[~bad]))},
                {**row, "measure": "mean GRPO advantage, broken format", "value": _nan_mean(adv, bad)},
                {**row, "measure": "mean GRPO advantage, reward 0 beside a broken rollout",
                 "value": _nan_mean(adv, with_bad & ~bad & (r == 0))}]
    return rows


def rlqr_readings(rec: pd.DataFrame, params: Mapping[str, Any]) -> list[dict[str, Any]]:
    """RL-QR's [theta, 1] normalisation read as min-max or as division by the group's
    largest penalty: a toy group, the mean penalty and mean advantage of penalised
    rollouts on the RL-QR records ``rec``."""
    from qrlib.methods.rlqr import rewards as R_rlqr

    raw = rec.part_raw_penalty.to_numpy(dtype=float)
    hit = raw > 0
    rows = []
    for norm in ("minmax", "max"):
        pen = np.zeros(len(rec))
        for _, idx in rec.groupby("qid").indices.items():
            pen[idx] = R_rlqr.rlqr_group_penalty(raw[idx], params["theta"], norm)
        r = params["lambda1"] * rec.part_ndcg.to_numpy(dtype=float) + params["lambda2"] * pen
        row = {"reading": "RL-QR [theta, 1]", "choice": norm}
        toy = R_rlqr.rlqr_group_penalty([0, 2, 5, 40], 0.1, norm)
        rows += [
            {**row, "measure": "toy group 0, 2, 5, 40", "value": ", ".join(f"{v:.3f}" for v in toy)},
            {**row, "measure": "mean penalty, penalised rollouts", "value": _nan_mean(pen, hit)},
            {**row, "measure": "mean GRPO advantage, penalised rollouts",
             "value": _nan_mean(grpo_advantage(r, rec.qid), hit)}]
    return rows


def epsilon_readings(seed: int, epsilons: Sequence[float] = (0.0, 0.1, 0.3),
                     n_docs: int = 20, reps: int = 400) -> list[dict[str, Any]]:
    """The bandit paper's epsilon-greedy (Table 1 gives no epsilon) on a toy request: one
    arm with 3 relevant documents in 4, three arms with none; precision at 10 and 25 %."""
    from qrlib.methods.bandits import bandits as B

    arms = [[f"g{i}" if i % 4 else f"n{i}" for i in range(n_docs)]] + [
        [f"x{a}_{i}" for i in range(n_docs)] for a in range(3)]
    req = B.make_request(arms, {f"g{i}": 1 for i in range(n_docs) if i % 4})
    rows = []
    for eps in epsilons:
        order = B.simulate(req, B.Policy(f"eg{eps}", "ε-greedy", "egreedy", epsilon=eps),
                           reps=reps, seed=seed)
        prec, _ = B.precision_recall(order, req.rel, [0.1, 0.25])
        for b, v in zip((10, 25), prec.mean(axis=0)):
            rows.append({"reading": "bandit Table 1 epsilon", "choice": f"epsilon {eps:g}",
                         "measure": f"precision at {b}% budget (toy, K=4)", "value": float(v)})
    return rows


def open_readings(envs: Mapping[str, Any], rewards: Mapping[str, tuple[str, str, Mapping]],
                  seed: int) -> pd.DataFrame:
    """:func:`acqo_readings`, :func:`rlqr_readings` and :func:`epsilon_readings` as one
    table, floats written with four decimals."""
    acqo = R.make_reward("acqo_stage2", **rewards["ACQO Stage II"][2]).params
    rlqr = R.make_reward("rlqr", **rewards["RL-QR"][2]).params
    tab = pd.DataFrame(acqo_readings(envs["ACQO Stage II"].records_frame(), acqo)
                       + rlqr_readings(envs["RL-QR"].records_frame(), rlqr)
                       + epsilon_readings(seed))
    tab["value"] = [f"{v:.4f}" if isinstance(v, float) else v for v in tab.value]
    return tab


def released_presets(names: Sequence[str] = ("deepretrieval_ndcg", "deepretrieval_sql")) -> pd.DataFrame:
    """The parameters of each reward under its ``paper`` and ``released`` presets."""
    return pd.DataFrame({f"{n} ({p})": R.make_reward(n, preset=p).params
                         for n in names for p in ("paper", "released")}).T


# =========================================================================== findings
SHARE_COL = "share of groups where a copy is a top rollout"


def key_numbers(t_stats: pd.DataFrame, t_copy: pd.DataFrame) -> dict[str, Any]:
    """The numbers the smoke tests read (from the saved tables): each reward's share of
    zero-std groups and, per copy penalty, the share of groups a copy tops."""
    out: dict[str, Any] = {}
    for r in t_stats.to_dict("records"):
        out[f"frac_zero_std.{r['reward']}"] = r["frac_reward_zero_std"]
    for r in t_copy.to_dict("records"):
        out[f"copy_top_share.p={r['p']:g}"] = r[SHARE_COL]
    return out


def _spread_sentences(z: pd.Series, group_size: int) -> list[str]:
    """The share of groups without reward spread: its range over the rewards (the reward
    at each end named) and median, and which rewards give every group spread."""
    head = (f"Over the {len(z)} rewards, the share of {group_size}-rollout groups with no reward "
            f"spread (no GRPO signal) runs {spread(z, '.2f')}, median {z.median():.2f}."
            if len(z) > 1 else
            f"The share of {group_size}-rollout groups with no reward spread (no GRPO signal) is "
            f"{spread(z, '.2f')}.")
    full = list(z.index[z == 0])
    if len(z) == 1:
        return [head]
    return [head, f"{len(full)} of them give every group some spread ({', '.join(full)})."
            if full else "No reward gives every group some spread."]


def findings(t_stats: pd.DataFrame, t_copy: pd.DataFrame, group_size: int) -> str:
    """The "What we found" paragraph: which rewards leave most groups without spread, and
    what SAGE's copy penalty does to copies."""
    z = t_stats.set_index("reward")["frac_reward_zero_std"].sort_values()
    out = _spread_sentences(z, group_size) if len(z) else []
    c = t_copy.sort_values("p")
    if len(c) > 1:
        adv = c["mean GRPO advantage of copies"]
        out.append(f"Without SAGE's copy penalty (p = {c.p.iloc[0]:g}) a verbatim copy is a top "
                   f"rollout in {c[SHARE_COL].iloc[0]:.0%} of groups and with p = "
                   f"{c.p.iloc[1]:g} in {c[SHARE_COL].iloc[1]:.0%}, while the mean GRPO advantage "
                   f"of copies goes from {adv.iloc[0]:+.3f} to {adv.iloc[-1]:+.3f} at p = "
                   f"{c.p.iloc[-1]:g}.")
    return paragraph(out)
