# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% tags=["parameters"]
profile = "dev"  # profile name (smoke | cpu | cpu-long | gpu)
run_dir = "../runs/dev"  # synthesised sets, adapters and logs of this notebook go here
figures_dir = "../figures/dev"  # figures of this run
tables_dir = "../tables/dev"  # tables of this run
cache_dir = None  # shared cache (dequantised models, embeddings); None means qrlib default
seed = 0  # seed for document sampling, training and the bootstrap
data_dir = None  # BEIR folders; None means ../shared/data or $QRLIB_DATA
model = "smollm2"  # the rewriter policy (RL-QR: Qwen3-4B/8B/14B in no-think mode)
datasets = ["scifact"]  # indexes: synthesise for each, train one rewriter per retriever, test on its real test queries
retrievers = ["bm25", "dense"]  # Lexical and Semantic in RL-QR's terms
n_test_queries = 20  # real test queries per index; None means the whole test split
n_distractors = 300  # corpus cut (synthesis, training and test); None means the full corpus
synthesis_model = "qwen2.5-coder-0.5b"  # the offline model that writes the synthetic queries
n_synthesis_docs = 8  # documents sampled from the index (those no test query judges)
synthesis_doc_words = 160  # a document is cut to this many words in the prompt
synthesis_max_new_tokens = 96  # budget of one synthesis
prefill = "<answer>"  # start of the rewriter's answer ("" leaves the tags to the model)
reward_k = 3  # nDCG@k of the reward (RL-QR evaluates nDCG@3)
train_sets = ["all"]  # training questions per rewriter: all (RL-QR) | hard (only those whose source the raw question does not rank first for that retriever; a lever against copying) | room (only those whose source the raw question ranks 2-50)
train_steps = 2  # GRPO optimizer steps per rewriter
prompts_per_step = 1  # synthetic queries per step
num_generations = 4  # rollouts per query (the GRPO group)
max_completion_length = 32  # token budget of one rollout
temperature = 1.0  # rollout temperature (RL-QR: TRL's defaults, i.e. 1.0)
top_p = 1.0  # rollout nucleus sampling (TRL default)
algorithm = "grpo"  # grpo | dapo (qrlib.rl.train presets)
beta = 0.0  # KL coefficient (TRL's GRPOConfig default, which RL-QR says it kept)
learning_rate = 5e-5  # LoRA learning rate
lora_r = 16  # LoRA rank
dynamic_sampling = 0  # DAPO dynamic sampling rounds for groups whose rewards are all equal (0: off)
stop = []  # stop strings of rollouts and of test decoding (kept in the completion), e.g. ["</answer>"]
eval_autocast = False  # bf16 autocast of greedy test rewriting (False keeps the fp32 outputs)
bootstrap = 2000  # paired-bootstrap resamples
n_examples = 5  # example rewrites shown
torch_threads = 0  # CPU threads for torch; 0 keeps torch's default
rollouts = "hf"  # generation engine: hf | vllm (qrlib.generation.engine)
dense_model = "minilm"  # encoder of the dense retriever: offline all-MiniLM-L6-v2; a hub id (BAAI/bge-base-en-v1.5) on GPU

# %% [markdown]
# # 14 · RL-QR: a rewriter per index, trained without a single human query
#
# *Paper:* [Annotation-Free Reinforcement Learning Query Rewriting via Verifiable Search Reward](https://arxiv.org/abs/2507.23242) (Cha, Kim, Hahn, Kim, Han and Jeon; arXiv:2507.23242, 2025).
#
# RL-QR asks what to do when an index has **no labelled queries at all**. Its answer has two
# parts:
#
# 1. **Index-aligned query synthesis** (Alg. 1, Table 1): an offline model reads one
#    document of the index and writes a situation in which someone needs it, the question
#    that person would ask, and the answer. The source document is the question's only
#    relevant document.
# 2. **Annotation-free RL** (Sec. 3.2): one rewriter per retriever is trained with GRPO on
#    those synthetic questions alone, with the reward
#
# $$ r_i = \lambda_1\,\mathrm{nDCG@3}(q'_i) + \lambda_2\,\tilde p_i, $$
#
# where $\tilde p_i \le 0$ counts the characters the rollout writes outside `<answer>`
# (all of them when the tags are missing), normalised within the group so that the
# non-zero penalties span $[\theta, 1]$ (Eq. 5-6; `qrlib.methods.rlqr.rewards`,
# $\lambda_1 = 1$, $\lambda_2 = 0.5$, $\theta = 0.1$: our choice, the paper gives none).
#
# The rewriter is then tested on the **real** test queries of the same index, in RL-QR
# Table 2's layout: raw query, the untrained rewriter, the RL-QR rewriter, per retriever,
# nDCG@3, with query length (Table 3). Rollouts are parsed the way the test rewrites are
# (strict format first, then lenient recovery), so format errors cost through $\tilde p_i$
# and not by searching nothing; notebook 08 trained with a strict parser and saw 1.7 %
# well-formed rollouts.

# %%
from qrlib import session

S = session.start("14_rlqr", run_dir=run_dir, figures_dir=figures_dir, tables_dir=tables_dir,
                  cache_dir=cache_dir, seed=seed, torch_threads=torch_threads, rollouts=rollouts,
                  dense_model=dense_model)
run_dir, figures_dir, tables_dir, out_dir, record = (S.run_dir, S.figures_dir, S.tables_dir,
                                                     S.out_dir, S.record)

import gc

import matplotlib.pyplot as plt
import pandas as pd

from qrlib import plots
from qrlib.core.io import save_json, save_table
from qrlib.data import datasets as qdata
from qrlib.eval import published
from qrlib.eval.compare import compare, comparison_table
from qrlib.eval.stats import fmt_interval
from qrlib.eval.scale import SCALE_COLUMNS, fmt_scale, log_scale, scale_columns
from qrlib.generation.contract import DecodingContract
from qrlib.generation import engine, policy, prompts, rewrite
from qrlib.methods.rlqr import pipeline as rlqr
from qrlib.retrieval import retrievers as retrieval

# %% [markdown]
# ## 1. Indexes and their real test queries
#
# Each index is a BEIR test collection; its real test queries are used **only** for the
# final test. Synthesis draws from the documents that no test query judges.

# %%
DATA, RETRIEVERS = {}, {}
for name in datasets:
    full = qdata.load_dataset(name, "test", data_dir=data_dir)
    DATA[name] = te = qdata.subset(full, n_queries=n_test_queries, n_distractors=n_distractors,
                                   seed=seed)
    for kind in retrievers:
        kw = {"cache_dir": cache_dir, "show_progress": False} if kind == "dense" else {}
        RETRIEVERS[name, kind] = retrieval.build_retriever(kind, te.corpus, **kw)
    print(f"{name}: {len(te.queries)} test queries, {len(te.corpus)} documents")

# %% [markdown]
# ## 2. Index-aligned query synthesis (Alg. 1)
#
# The synthesis prompt (`rlqr/synthesis`, in our words); the answer is prefilled with
# `{"scenario": "` so the JSON layout is given. A question is kept when it parses, is not
# empty (the model's "not enough information"), has 4-64 words and is not copied verbatim
# from the document (`qrlib.methods.rlqr.synthesis.usable`). Sets are cached in the run
# folder and reused when the settings match.

# %%
print(prompts.get("rlqr/synthesis").user)
ATTEMPTS, rows = {}, []
for name, te in DATA.items():
    docs = rlqr.synthesis_docs(te, n_synthesis_docs, seed=seed)
    ATTEMPTS[name], how = rlqr.synthesize(
        te, docs, out_dir / "synthesis" / name, model=synthesis_model,
        doc_words=synthesis_doc_words, max_new_tokens=synthesis_max_new_tokens)
    print(f"{name}: {len(docs)} documents, synthesis {how}")
    rows.append(rlqr.synthesis_summary(
        name, ATTEMPTS[name], {k: RETRIEVERS[name, k].search for k in retrievers}))
engine.close_engines()
SYNTH = pd.DataFrame(rows)
for r in SYNTH.to_dict("records"):
    record(f"{r['dataset']}.synthesis.usable", r["usable"])
save_table(SYNTH.round(4), "14_synthesis", tables_dir,
           caption=f"RL-QR query synthesis with {synthesis_model}: usable questions, their length "
                   "in words, and how often each retriever ranks the source document 1st / in "
                   f"the top 10 when the question is searched as it is [profile: {profile}]")
SYNTH

# %% [markdown]
# A few synthesised items (the reason says why a question was dropped):

# %%
pd.set_option("display.max_colwidth", 100)
pd.concat([a.head(n_examples).assign(dataset=n) for n, a in ATTEMPTS.items()])[
    ["dataset", "doc_id", "usable", "reason", "scenario", "question"]]

# %% [markdown]
# ## 3. One rewriter per retriever, synthetic queries only (Eq. 5-7)
#
# GRPO with a LoRA adapter (TRL's `GRPOTrainer`; RL-QR trains Qwen3 with TRL's default
# settings for one epoch). The rewrite prompt asks for the query inside `<answer>` tags
# and nothing else; with `prefill` the answer starts with `<answer>`. Each finished
# training gives its memory back before the next (`qrlib.rl.release`, called by `train`).

# %%
SETS = {"all": ("RL-QR", ""), "hard": ("RL-QR (hard questions)", "-hard"),
        "room": ("RL-QR (source at 2-50)", "-room")}  # label, run suffix
unknown = [t for t in train_sets if t not in SETS]
assert not unknown, f"unknown train_sets {unknown}; accepted: {', '.join(SETS)}"
SUMMARIES, TRAIN_SIZES = {}, []
for name, te in DATA.items():
    queries, qrels = rlqr.training_set(ATTEMPTS[name])
    for kind in retrievers:
        for tset in train_sets:
            q_, r_ = ((queries, qrels) if tset == "all" else
                      rlqr.hard_subset(queries, qrels, RETRIEVERS[name, kind]) if tset == "hard"
                      else rlqr.room_subset(queries, qrels, RETRIEVERS[name, kind]))
            TRAIN_SIZES.append({"dataset": name, "retriever": kind, "training set": tset,
                                "questions": len(q_)})
            if not q_:
                print(f"{name} · {kind}: no {tset} training question, so no rewriter for it")
                continue
            SUMMARIES[name, kind, tset] = s = rlqr.train_rewriter(
                f"rlqr-{name}-{kind}{SETS[tset][1]}", RETRIEVERS[name, kind], q_, r_,
                run_dir=run_dir, k=reward_k, prefill=prefill, model=model, dataset=name,
                retriever=kind, algorithm=algorithm, beta=beta, max_steps=train_steps,
                prompts_per_step=prompts_per_step, num_generations=num_generations,
                max_completion_length=max_completion_length, temperature=temperature,
                top_p=top_p, learning_rate=learning_rate, lora_r=lora_r, lora_alpha=2 * lora_r,
                dynamic_sampling=dynamic_sampling, stop=list(stop), seed=seed,
                save_steps=max(1, train_steps // 4))
            print(name, kind, tset, {k: s[k] for k in ("steps", "train_seconds", "rollouts")})
print(pd.DataFrame(TRAIN_SIZES).to_string(index=False))
save_json({"/".join(key): s for key, s in SUMMARIES.items()}, out_dir / "summaries.json")
gc.collect()  # the trainers' models and engines, before the evaluation loads its own
LOGS = {key: pd.read_csv(s["log"], dtype={"qids": str}) for key, s in SUMMARIES.items()}

# %% [markdown]
# ### Training health
#
# Per step and run (`qrlib.rl.health`): the reward, the shares of rollouts that are
# well-formed and that hit the token budget, the share that copy the input query (*copy*)
# or repeat one of the prompt's own examples or placeholders (*echo*), and the share of
# groups whose rewards are all equal (no GRPO signal). A run has **collapsed** when its
# copy or echo share is above 0.9 over its last quarter of steps.

# %%
from qrlib.rl.health import health_report

HEALTH, health_lines = health_report(SUMMARIES, "14_health",
                                     tables_dir=tables_dir, figures_dir=figures_dir,
                                     profile=profile, setting=model)
print("\n".join(health_lines))

# %% [markdown]
# ### Training curves
#
# Mean reward (nDCG@3 plus the penalty term), its retrieval part alone, and the share of
# well-formed rollouts per step.

# %%
fig, axes = plt.subplots(1, 3, figsize=(14, 3.4))
for i, ((name, kind, tset), log) in enumerate(LOGS.items()):
    ndcg = next((c for c in ("part/ndcg", f"part/ndcg@{reward_k}") if c in log), None)
    for ax, col in zip(axes, ("reward", ndcg, "format_valid")):
        if col:
            ax.plot(log.step, log[col].rolling(8, min_periods=1).mean(), color=f"C{i}",
                    label=f"{name} · {kind} · {tset}")
axes[0].set(xlabel="GRPO step", ylabel="reward (rolling mean of 8)")
axes[1].set(xlabel="GRPO step", ylabel=f"nDCG@{reward_k} part")
axes[2].set(xlabel="GRPO step", ylabel="well-formed rollouts", ylim=(-0.05, 1.05))
for ax in axes:
    plots.legend_outside(ax, where="below")
fig.tight_layout()
_ = plots.save_figure(fig, "14_rlqr_curves", figures_dir, profile=profile,
                  caption="RL-QR training on synthetic queries: reward, its nDCG part and "
                          "format validity per step",
                  setting=f"{model}; from the logs: " + "; ".join(
                      f"{'/'.join(key)} {fmt_scale(log_scale(lg))}" for key, lg in LOGS.items()))

# %% [markdown]
# ## 4. The real test queries: raw vs untrained vs RL-QR (Table 2's layout)
#
# Greedy rewrites of every test query by the untrained model and by each trained rewriter
# (each searched with the retriever it was trained for), scored with nDCG@3 (RL-QR's
# measure) and nDCG@10, each against the raw query with a 95 % paired bootstrap over the
# test queries (the `qrlib.eval.compare` schema). A rewrite that yields no query is
# searched as the raw query.

# %%
# the decoding contract of training (prompt, prefill, stop strings, budget, parser): the
# untrained model decodes with it, and each trained adapter carries its own, checked equal
CONTRACT = DecodingContract(prompt=rlqr.REWRITE_PROMPT, prefill=prefill, stop=tuple(stop),
                            max_new_tokens=max_completion_length, fmt="plain")


def rewrite_all(adapter, te):
    if adapter is not None:
        assert DecodingContract.load(adapter) == CONTRACT, adapter
    m, tok = policy.load_policy(model, adapter=adapter)
    df = rewrite.rewrite_queries(m, tok, te.queries, contract=adapter or CONTRACT,
                                 autocast=eval_autocast, progress=False)
    del m
    gc.collect()  # the engine stays: the next model's weights are pushed into it (as in 13);
    return df     # a new engine per model was never given back, and six went out of memory


REWRITES, rows, cmp_rows, PER_Q = {}, [], [], {}  # PER_Q: (dataset, retriever) -> label -> scores
for name, te in DATA.items():
    REWRITES[name, "untrained"] = rewrite_all(None, te)
    for kind in retrievers:
        n = len(te.queries)
        methods = {"raw query": (None, scale_columns(None, test_queries=n), "baseline"),
                   "untrained": (REWRITES[name, "untrained"],
                                 scale_columns(model, test_queries=n,
                                               test_valid=REWRITES[name, "untrained"].format_ok.mean()),
                                 "untrained")}
        for tset in [t for t in train_sets if (name, kind, t) in SUMMARIES]:
            REWRITES[name, kind, tset] = rewrite_all(SUMMARIES[name, kind, tset]["adapter"], te)
            methods[SETS[tset][0]] = (REWRITES[name, kind, tset],
                                      scale_columns(model, [LOGS[name, kind, tset]],
                                                    test_queries=n,
                                                    test_valid=REWRITES[name, kind, tset].format_ok.mean()),
                                      "trained")
        measures = ("nDCG@3", "nDCG@10")
        raw = rlqr.search_scores(RETRIEVERS[name, kind], te.qrels, te.queries, measures)
        scores = {}  # one search per method, scored on every measure
        for label, (df, scale, kind_) in methods.items():
            texts = te.queries if df is None else dict(zip(df.qid, df.search_text))
            pq = raw if df is None else rlqr.search_scores(RETRIEVERS[name, kind], te.qrels,
                                                           texts, measures)
            scores[label] = pq
            words = pd.Series([len(t.split()) for t in texts.values()])
            rows.append({"dataset": name, "retriever": kind, "model": label,
                         "nDCG@3": pq["nDCG@3"].mean(), "query words mean": words.mean(),
                         "query words std": words.std(),
                         "format ok": 1.0 if df is None else df.format_ok.mean(),
                         "modified": 0.0 if df is None else df.modified.mean(), **scale})
        PER_Q[name, kind] = scores
        for metric in measures:
            for label, (df, scale, kind_) in methods.items():
                if df is not None:
                    cmp_rows.append(compare(scores[label][metric].to_dict(),
                                            raw[metric].to_dict(), paper="rlqr", dataset=name,
                                            retriever=kind, metric=metric, method=label,
                                            kind=kind_, baseline="raw query", scale=scale,
                                            resamples=bootstrap, seed=seed))
engine.close_engines()
RESULTS = pd.DataFrame(rows)
COMPARISONS = comparison_table(cmp_rows)
save_table(RESULTS.round(4), "14_rlqr_results", tables_dir,
           caption=f"RL-QR on the real test queries: nDCG@3, query length in words (mean, std; "
                   f"Tables 2-3 layout), format and modification rates; training scale "
                   f"({', '.join(SCALE_COLUMNS)}) from each run's log; the rewriters saw "
                   f"synthetic queries only [profile: {profile}]")
save_table(COMPARISONS.round(4), "14_comparisons", tables_dir,
           caption="Untrained and RL-QR rewrites minus the raw query, nDCG@3 and nDCG@10, 95% "
                   "paired bootstrap over the test queries (qrlib.eval.compare schema) "
                   f"[profile: {profile}]")
for r in RESULTS.to_dict("records"):
    record(f"{r['dataset']}.{r['retriever']}.{r['model']}.ndcg3", r["nDCG@3"])
for r in COMPARISONS.to_dict("records"):
    record(f"{r['dataset']}.{r['retriever']}.{r['method']}.{r['metric']}.vs_raw",
           [r["diff"], r["lo"], r["hi"]])
RESULTS.round(3)

# %%
COMPARISONS[["dataset", "retriever", "metric", "method", "score", "baseline score", "diff",
             "lo", "hi", "wins", "losses", "RL steps"]].round(3)

# %% [markdown]
# Query by query (nDCG@3, RL-QR's measure): each trained rewriter (y) against the raw
# query (x) on the real test queries. A rewriter that copies the query puts every point
# on the diagonal.

# %%
head_14 = COMPARISONS[(COMPARISONS.kind == "trained") & (COMPARISONS.metric == "nDCG@3")]
key_14 = {f"{r.dataset}/{r.retriever}: {r.method}": r for r in head_14.itertuples()}
fig = plots.per_query_scatter(
    {k: (PER_Q[r.dataset, r.retriever]["raw query"]["nDCG@3"].to_dict(),
         PER_Q[r.dataset, r.retriever][r.method]["nDCG@3"].to_dict()) for k, r in key_14.items()},
    metric="nDCG@3", baseline="raw query",
    intervals={k: fmt_interval(r._asdict()) for k, r in key_14.items()})
_ = plots.save_figure(fig, "14_per_query", figures_dir, profile=profile, setting=model,
                      caption="Per-query nDCG@3 of each RL-QR rewriter (y) against the raw query "
                              "(x) on the real test queries; title: n, wins / losses / ties and "
                              "the mean difference with its 95 % paired-bootstrap interval")
plt.show()

# %% [markdown]
# Example rewrites of real test queries, before and after training:

# %%
ex = []
for name, te in DATA.items():
    base = REWRITES[name, "untrained"].set_index("qid")
    for kind in retrievers:
        trained_ = {SETS[t][0]: REWRITES[name, kind, t].set_index("qid") for t in train_sets
                    if (name, kind, t) in REWRITES}
        for q in list(te.queries)[:n_examples]:
            ex.append({"index": f"{name} · {kind}", "query": te.queries[q],
                       "untrained": base.loc[q, "rewrite"],
                       **{label: df.loc[q, "rewrite"] for label, df in trained_.items()}})
pd.DataFrame(ex)

# %% [markdown]
# The paper's Table 2 (nDCG@3 in %, its own indexes, Qwen3 rewriters), from
# `qrlib/methods/rlqr/published.yaml`:

# %%
published.table("rlqr", "Table 2")

# %% [markdown]
# ## What we found
#
# Built from `14_comparisons` (nDCG@3, RL-QR's measure), `14_synthesis`, `14_rlqr_results`
# and `14_health` of this run by `qrlib.workbook.findings`:

# %%
from IPython.display import Markdown

from qrlib.workbook.findings import what_we_found

trained_14 = RESULTS[RESULTS.model.isin(COMPARISONS[COMPARISONS.kind == "trained"].method)]
extra = [f"The trained rewriters modify {trained_14.modified.min():.0%}-"
         f"{trained_14.modified.max():.0%} of the real test queries."]
extra += [f"On {r['dataset']}, BM25 ranks the source document first for "
          f"{r.get('bm25 source@1', float('nan')):.0%} of the {r['usable']} synthetic training "
          "questions as they are, so copying them is already near-optimal there."
          for r in SYNTH.to_dict("records") if r.get("bm25 source@1", 0) >= 0.5]
display(Markdown(what_we_found(COMPARISONS[COMPARISONS.metric == "nDCG@3"], notebook="14_rlqr",
                               tables_dir=tables_dir, health=HEALTH, extra=extra)))
