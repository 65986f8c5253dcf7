"""Reward functions of the papers, as pure functions plus one registry.

Pure maths (no disk, no models): every function takes ranked lists, gold labels and
format flags and returns numbers. One module per source, all registering into
:data:`REWARDS` (in the spirit of ir-measures: one named object per reward, typed
parameters with defaults, the paper it comes from):

* :mod:`~qrlib.rewards.base`: ranking basics (``gold_ranks``, ``recall_at``,
  ``ndcg_at_k``), :func:`same_query`, :class:`Observation`, the registry, ``ndcg``;
* :mod:`~qrlib.rewards.deepretrieval`: Table 8 tiers, nDCG, SQL execution accuracy,
  with ``paper`` and ``released`` presets;
* :mod:`~qrlib.rewards.acqo`: Eq. 3-10 and ConvSearch-R1's released rank reward;
* :mod:`~qrlib.rewards.sage`: SCS, CRS, the copy penalty (Eq. 1-3);
* :mod:`~qrlib.rewards.rlqr`: NDCG plus the group-normalised penalty (Eq. 5-6).

A params file says ``reward: acqo_stage2`` with ``reward_params: {eta: 0.6}`` (or
``{preset: released}``); :func:`make_reward` binds it and :func:`list_rewards` lists
them all. Each registered reward declares what :class:`qrlib.env.RewardEnv` must give
it: its retrieval depth, the dataset columns it reads and, where needed, a pre-step
(SQL execution), so the environment never looks at reward names.
"""
from __future__ import annotations

from qrlib.rewards.base import (REWARDS, Observation, Ranked, Reward, RewardSpec,
                                gold_ranks, list_rewards, make_reward, ndcg_at_k,
                                normalise_query, recall_at, register_reward,
                                reward_variance_zero, same_query)
from qrlib.rewards.deepretrieval import (ANSWER_RANK_FLOOR, ANSWER_RANK_TIERS,
                                         LITERATURE_DEPTH, RECALL_FLOOR, RECALL_TIERS,
                                         RELEASED_NDCG_K, answer_rank_tier_reward,
                                         deepretrieval_total, recall_tier_reward,
                                         released_ndcg_k, sql_execution_match)
from qrlib.rewards.acqo import (_RSFTable, acqo_curriculum, acqo_score, acqo_stage1,
                                acqo_stage2, acqo_tau, phi, phi_prime)
from qrlib.rewards.sage import copy_penalty, sage_crs, sage_scs, strategy_ranks
from qrlib.rewards.rlqr import rlqr_group_penalty, rlqr_raw_penalty, rlqr_rewards

__all__ = [
    "REWARDS", "Observation", "Ranked", "Reward", "RewardSpec", "gold_ranks",
    "list_rewards", "make_reward", "ndcg_at_k", "normalise_query", "recall_at",
    "register_reward", "reward_variance_zero", "same_query",
    "ANSWER_RANK_FLOOR", "ANSWER_RANK_TIERS", "LITERATURE_DEPTH", "RECALL_FLOOR",
    "RECALL_TIERS", "RELEASED_NDCG_K", "answer_rank_tier_reward", "deepretrieval_total",
    "recall_tier_reward", "released_ndcg_k", "sql_execution_match",
    "acqo_curriculum", "acqo_score", "acqo_stage1", "acqo_stage2", "acqo_tau", "phi",
    "phi_prime", "copy_penalty", "sage_crs", "sage_scs", "strategy_ranks",
    "rlqr_group_penalty", "rlqr_raw_penalty", "rlqr_rewards",
]
