# ---
# jupyter:
#   qrlib:
#     reads: [05_vanilla_rl, 07_acqo_stage2, 08_sage, 12_acqo_vanilla_rl, 13_deepretrieval_sql, 14_rlqr, 15_sage_ablation, 16_acqo_transfer, 17_deepretrieval_evidence, 18_acqo_ablation, 19_prompting_baselines]  # their published tables (qrlib.freshness)
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% tags=["parameters"]
profile = "dev"  # profile name (runner injects it)
run_dir = "../runs/dev"  # run folder (nothing is trained or generated here)
figures_dir = "../figures/dev"  # figures of this run
tables_dir = "../tables/dev"  # tables of this run; the training notebooks' tables are read from here
cache_dir = None  # unused: no model or index is loaded
seed = 0  # seed of the paired bootstrap
bootstrap = 10000  # paired-bootstrap resamples
notebooks = ["05_vanilla_rl", "07_acqo_stage2", "08_sage", "12_acqo_vanilla_rl", "13_deepretrieval_sql", "14_rlqr", "15_sage_ablation", "16_acqo_transfer", "17_deepretrieval_evidence", "18_acqo_ablation"]  # training notebooks whose trained rows are gathered

# %% [markdown]
# # 20 · Every trained row against the raw query and the prompting baseline
#
# *Papers:* all five; the prompting baseline is notebook 19's.
#
# A trained rewriter is a result only when it beats two things on the same test queries:
# the query as the user wrote it, and what the same model does **without training** when it
# is simply asked well. Each training notebook compares its rows with the raw query; notebook
# 19 scores the training-free rewrites, and its `best-prompt` row is the prompt chosen per
# dataset and retriever on *training* queries (so choosing it never saw a test query). This
# notebook puts the two side by side for every trained row of the workbook, with the row's
# test format validity, its collapse check and its training scale, so that one table answers
# "did training help, and did it beat prompting?".
#
# Both differences are paired: for a row scored on test queries $q_1..q_n$,
#
# $$\Delta = \frac1n \sum_{i=1}^{n} \big(s_{\text{trained}}(q_i) - s_{\text{base}}(q_i)\big),$$
#
# with a 95 % percentile interval from resampling the queries (`qrlib.eval.stats.paired_bootstrap`).
# A row *beats* a baseline only when the whole interval lies above 0.

# %%
from qrlib import session

S = session.start("20_trained_rows", run_dir=run_dir, figures_dir=figures_dir,
                  tables_dir=tables_dir, cache_dir=cache_dir, seed=seed)

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

from qrlib import plots
from qrlib.core.io import save_table
from qrlib.eval import trained_rows as TR
from qrlib.eval.compare import comparison_table, save_comparisons

record = S.record

# %% [markdown]
# ## The tables this notebook reads
#
# Every training notebook saves its comparison table beside the per-query values behind it
# (`NN_comparisons_per_query.csv`, written by `qrlib.eval.compare.save_comparisons`).
# Notebooks that have not run in this profile are listed, not guessed.

# %%
CMP, PER_Q, MISSING = TR.load_notebook_tables(tables_dir, notebooks)
PROMPTING = TR.prompting_rows(tables_dir)
pd.DataFrame({"notebook": notebooks,
              "trained rows": [int(CMP[n]["kind"].isin(TR.TRAINED_KINDS).sum()) if n in CMP
                               else 0 for n in notebooks],
              "in this run": [n in CMP for n in notebooks]})

# %% [markdown]
# ## Pairing with the prompting baseline
#
# A trained row is paired with notebook 19's prompting baseline only where the two searched
# the same thing: same dataset, retriever and metric, every test query of the row among
# notebook 19's, and the **raw query's scores identical** on those queries (if they differ,
# the two notebooks searched different collections, and the row says so instead of
# comparing). The collapse check reads the last training quarter of the row's final run:
# it collapsed when more than 90 % of its rollouts copied the query or echoed the prompt's
# own example (`qrlib.rl.health`). Those flags miss a rewriter that changes the query in a way
# the retriever cannot see (one glued out-of-vocabulary token appended), so the test is read
# too: a row whose every test query scores exactly what the raw query scores (`equal to raw`
# = 1.00) is a **no-op at test** and counts as collapsed.
#
# Text-to-SQL (notebook 13) has no raw query: the question is not something the database can
# run. Its trained rows are listed with `no raw query` against the raw query, and their
# training-free comparison is the notebook's own zero-shot model on the same questions
# (notebook 19 does not cover SQL).
# Where notebook 19 has no baseline in a row's metric (17's answer-hit H@N), the notebook's
# own model before training with the same prompt (its `untrained X` beside `trained X`) is the
# training-free comparison, named in `prompting note`: a weaker bar than 19's prompt chosen on
# training queries.

# %%
TABLE, VS_PROMPT = TR.trained_table(CMP, PER_Q, PROMPTING, resamples=bootstrap, seed=seed)
save_table(TABLE.round(4), "20_trained_rows", tables_dir,
           caption=("Every trained row (kind trained or warm start) of the training notebooks: "
                    "its difference to the raw query (the notebook's own comparison) and, "
                    "paired on the same test queries, to notebook 19's prompting baseline "
                    f"(best-prompt; a row without a raw query, 13's SQL, to its notebook's "
                    f"training-free baseline instead), 95% paired bootstrap ({bootstrap} "
                    "resamples); test "
                    "format validity, the last training quarter's copy and echo shares and "
                    "collapse verdict (> 0.9, or every test score equal to the raw "
                    "query's), and the training scale from the runs' logs "
                    f"[profile: {profile}]"))
if VS_PROMPT:
    save_comparisons(comparison_table(VS_PROMPT), "20_comparisons", tables_dir,
                     caption=("Trained rows minus notebook 19's prompting baseline on the "
                              "same test queries (qrlib.eval.compare schema) "
                              f"[profile: {profile}]"))
with pd.option_context("display.max_columns", None, "display.width", 250):
    display(TABLE[["notebook", "dataset", "retriever", "method", "vs raw", "vs raw lo",
                   "vs raw hi", "vs prompting", "vs prompting lo", "vs prompting hi",
                   "test valid", "collapse", "RL steps", "train queries"]].round(3))

# %% [markdown]
# The same differences as a figure: blue against the raw query, orange against the
# prompting baseline; a point whose bar crosses the dashed line cannot be told apart from
# its baseline.

# %%
fig = TR.forest_figure(TABLE)
plots.save_figure(fig, "20_trained_rows", figures_dir,
                  caption=("Each trained row's difference to the raw query (blue) and to "
                           "notebook 19's prompting baseline (orange), 95% paired bootstrap"),
                  profile=profile)
plt.close(fig)

# %% [markdown]
# Rows without a prompting comparison, and why:

# %%
TABLE.loc[TABLE["prompting note"].astype(str).str.len() > 0,
          ["notebook", "dataset", "retriever", "metric", "method", "prompting note"]]

# %% [markdown]
# ## What we found
#
# Built from `20_trained_rows` of this run.

# %%
display(Markdown(TR.findings(TABLE, MISSING)))

# %% [markdown]
# The numbers the tests read back (recorded quietly; nothing to read here).

# %%
record("trained_rows.n", len(TABLE))
record("trained_rows.paired", int((TABLE["vs prompting verdict"] != "not compared").sum()))
record("trained_rows.beat_both", int(((TABLE["vs raw verdict"] == "beats") &
                                      (TABLE["vs prompting verdict"] == "beats")).sum()))
record("trained_rows.missing", len(MISSING))
