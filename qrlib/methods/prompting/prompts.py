"""Pseudo-document prompts of the SPQE baseline (arXiv:2510.17139 Sec. 3; Query2doc and
HyDE's task-specific instructions), in our own words: one per kind of query, since a claim
to be checked, a health question and a multi-hop question want different passages. No
worked example and no placeholder the model could copy; the completion is the passage
itself (no answer tags, nothing to parse)."""
from __future__ import annotations

from qrlib.generation.prompts import PromptTemplate, register

PSEUDO_DOC = {
    "claim": ("Write a short passage from a scientific abstract that reports evidence for or "
              "against the following claim.\n\nClaim: {query}"),
    "health": ("Write a short passage from a medical research article or health information "
               "page about the following topic.\n\nTopic: {query}"),
    "question": ("Write a short encyclopedia passage that contains the facts needed to answer "
                 "the following question.\n\nQuestion: {query}"),
}
"""Kind of query -> the user message asking for a pseudo-document."""

for _kind, _text in PSEUDO_DOC.items():
    register(PromptTemplate(
        name=f"prompting/pseudo-doc-{_kind}", system="", user=_text, fields=("query",),
        source="SPQE (Xu et al., arXiv:2510.17139); Query2doc; HyDE",
        meta={"baseline": "pseudo-doc", "kind": _kind, "fmt": "plain"}))
