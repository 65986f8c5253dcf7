"""DeepRetrieval prompts (DeepRetrieval Sec. 2.2, App. H Fig. 13-17), in our own words.

Required elements kept: reason first inside ``<think>...</think>`` (the *think*
variants), then give the final query as JSON ``{"query": ...}`` inside
``<answer>...</answer>``; boolean operators (AND/OR) and parentheses for the literature
(PICO) and BM25 tasks; natural-language expansion for dense retrieval; a single SQL
statement for database search. Every task has a ``-think`` and a ``-nothink`` variant
(the paper's "w/o reasoning" ablation, Table 1). The paper's prompts end the assistant
turn with a lead-in sentence and an opened ``<think>`` ("Let me rewrite the query with
reasoning. <think>", App. H); ``meta["prefill"]`` holds that text for callers that prefill
it. The think layout is described in words, with no placeholder the model could copy into
its reasoning (an earlier ``<think> your reasoning </think>`` was copied verbatim by a
trained rewriter); only the answer's layout is shown. The reasoning is asked to be brief
(the paper's prompt asks for none in particular; an earlier "step by step" drove half of
Qwen2.5-Coder-0.5B's rollouts past a 128-token budget before they reached ``<answer>``).
"""
from __future__ import annotations

from qrlib.generation.prompts import PromptTemplate, register
from qrlib.methods.deepretrieval.formats import LEAD_INS

_THINK = ("First reason briefly about what to search for (two or three sentences) and close "
          "the reasoning with </think> (the <think> that opens it is already written). Then "
          "give the final result once, in the layout <answer> {{\"query\": \"...\"}} </answer>, "
          "and write nothing after </answer>.")
_NOTHINK = ("Do not explain. Give the final result as JSON inside <answer> </answer> tags "
            "and nothing else. Layout: <answer> {{\"query\": \"...\"}} </answer>")

_TASKS = {
    "literature": dict(
        system=("You are a clinical research specialist preparing a systematic literature "
                "search. You turn a study definition given in PICO form (P: patient, "
                "problem or population; I: intervention or exposure; C: comparison; "
                "O: outcome) into search terms for PubMed or ClinicalTrials.gov."),
        user=("Study definition:\nP: {P}\nI: {I}\nC: {C}\nO: {O}\n\n"
              "Write a search query that finds the studies matching this definition. "
              "Combine terms with the boolean operators AND and OR and group them with "
              "parentheses.\n"),
        fields=("P", "I", "C", "O"), source="DeepRetrieval App. H, Fig. 13"),
    "evidence": dict(
        system=("You rewrite questions into search queries for a BM25 engine over a "
                "Wikipedia corpus, so that a passage containing the answer ranks near "
                "the top."),
        user=("Question: {query}\n\nWrite the search query. Use the boolean operators AND "
              "and OR and parentheses to group terms.\n"),
        fields=("query",), source="DeepRetrieval App. H, Fig. 14"),
    "bm25": dict(
        system=("You rewrite user queries for a keyword search engine (BM25) over a "
                "document collection; documents are ranked by exact term overlap."),
        user=("User query: {query}\n\nWrite a search query that ranks the relevant "
              "documents highly. Use the boolean operators AND and OR and parentheses to "
              "group terms.\n"),
        fields=("query",), source="DeepRetrieval App. H, Fig. 15"),
    "dense": dict(
        system=("You rewrite user queries for a dense (embedding) retriever; documents "
                "are ranked by semantic similarity to the query."),
        user=("User query: {query}\n\nWrite a natural-language query, expanded with "
              "relevant concepts, that brings the relevant documents to the top.\n"),
        fields=("query",), source="DeepRetrieval App. H, Fig. 16"),
    "sql": dict(
        system=("You translate questions about a relational database into one SQLite "
                "query that returns exactly the requested answer."),
        user=("Database schema:\n{schema}\n\nQuestion: {question}\n\nWrite a single "
              "SQLite SELECT statement as the value of \"query\".\n"),
        fields=("schema", "question"), source="DeepRetrieval App. H, Fig. 17"),
}

for _task, _t in _TASKS.items():
    for _variant, _tail in (("think", _THINK), ("nothink", _NOTHINK)):
        register(PromptTemplate(
            name=f"deepretrieval/{_task}-{_variant}", system=_t["system"],
            user=_t["user"] + _tail, fields=_t["fields"], source=_t["source"],
            meta={"fmt": "deepretrieval" if _variant == "think" else "deepretrieval-nothink",
                  "prefill": f"{LEAD_INS[_task == 'sql']} <think>" if _variant == "think"
                  else "",
                  "task": _task}))
