"""Baseline rewriting prompts for SAGE's best-of-N comparison (SAGE Sec. 3.1, Fig. 3).

``dmqr/*``: the four rewriting strategies of DMQR-RAG (Li et al., 2024) as SAGE compares
against them: a general rewrite, a keyword rewrite, a pseudo-answer (a short passage that
would answer the query, searched in its place) and core-content extraction. ``generic/
rewrite``: one unguided "make this a better search query" prompt. Our wording; every
answer is ``<answer>{"query": "..."}</answer>`` with the JSON opening prefilled.
"""
from __future__ import annotations

from qrlib.generation.prompts import PromptTemplate, register

_TAIL = "\nReply as <answer>{{\"query\": \"...\"}}</answer>.\n\nQuery: {query}"
DMQR = {
    "general": "Rewrite the search query below so that it is clearer and more complete, "
               "keeping its meaning.",
    "keyword": "Turn the search query below into a short list of its most important "
               "keywords and names.",
    "pseudo-answer": "Write one sentence that could be the opening of a document answering "
                     "the search query below.",
    "core-content": "Extract the core information need of the search query below, dropping "
                    "everything that is not essential.",
}
for _i, (_name, _text) in enumerate(DMQR.items(), 1):
    register(PromptTemplate(
        name=f"dmqr/{_name}", system="", user=_text + _TAIL, fields=("query",),
        source="DMQR-RAG (Li et al., 2024) as compared in SAGE Sec. 3.1",
        meta={"fmt": "deepretrieval-nothink", "prefill": '<answer>{"query": "',
              "family": "dmqr", "strategy": _i}))

register(PromptTemplate(
    name="generic/rewrite", system="",
    user="Rewrite the search query below into a better query for a search engine." + _TAIL,
    fields=("query",), source="SAGE Sec. 3.1 (unguided reference)",
    meta={"fmt": "deepretrieval-nothink", "prefill": '<answer>{"query": "',
          "family": "generic", "strategy": 1}))
