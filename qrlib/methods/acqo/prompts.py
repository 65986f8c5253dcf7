"""ACQO prompts (ACQO App. C, Fig. 7a/7b), in our own words.

Required elements kept: rewrite the current question into a complete, retrieval-ready
form using the conversation history if any; keep the original query and expand it with
relevant information (return it unchanged if nothing helps); answer as JSON with the key
``query``; the decomposition variant allows up to 3 queries joined by ``%%``.
Parsed with ``parse_completion(text, "acqo")``.
"""
from __future__ import annotations

from qrlib.generation.prompts import PromptTemplate, register

_SYSTEM = (
    "You write search queries for a retrieval system. Read the user's current question, "
    "together with the earlier conversation if there is one, work out what the user "
    "actually wants, and restate it as a complete, self-contained query.")

_RULES_COMMON = (
    "Rules:\n"
    "- Keep the original question's content and add closely related terms, names or "
    "context that help a search engine find the right documents. If nothing useful can be "
    "added, give back the original question unchanged.\n"
    "- The goal is retrieval quality, not a fluent answer: do not answer the question.\n")

_RULES_DECOMPOSE = (
    "- If it helps retrieval, you may write several queries, but never more than 3.\n"
    "- Reply with JSON only, using the key \"query\": {{\"query\": \"...\"}}\n"
    "- When you write several queries, put them in the same string separated by %%, "
    "e.g. {{\"query\": \"first%%second%%third\"}}\n")

_RULES_SINGLE = (
    "- Write exactly one query.\n"
    "- Reply with JSON only, using the key \"query\": {{\"query\": \"...\"}}\n")

_USER = ("{rules}\n"
         "Conversation so far (may be empty):\n{context}\n\n"
         "Current question:\n{question}")

register(PromptTemplate(
    name="acqo/decompose", system=_SYSTEM,
    user=_USER.replace("{rules}", _RULES_COMMON + _RULES_DECOMPOSE),
    fields=("context", "question"), source="ACQO App. C, Fig. 7a",
    meta={"fmt": "acqo", "max_subqueries": 3}))

register(PromptTemplate(
    name="acqo/no-decompose", system=_SYSTEM,
    user=_USER.replace("{rules}", _RULES_COMMON + _RULES_SINGLE),
    fields=("context", "question"), source="ACQO App. C, Fig. 7b",
    meta={"fmt": "acqo", "max_subqueries": 1}))

# A one-shot variant: the same rules plus one worked split. An untrained 0.5B model given
# only the rules never splits a question (issue #10's probe: 1.0 sub-queries on average),
# so GRPO sees groups of near-identical copies with no reward spread. The example seeds
# exploration; RL then decides when to split and what to put in each part. The example is
# ours and deliberately off-domain (no film/person question of the test sets).
_EXAMPLE = (
    "Example:\n"
    "Current question:\nWhich was founded first, the University of Oslo or Uppsala "
    "University?\n"
    "{{\"query\": \"Which was founded first, the University of Oslo or Uppsala University?"
    "%%University of Oslo founded%%Uppsala University founded\"}}\n\n")

register(PromptTemplate(
    name="acqo/decompose-oneshot", system=_SYSTEM,
    user=_USER.replace("{rules}", _RULES_COMMON + _RULES_DECOMPOSE + "\n" + _EXAMPLE),
    fields=("context", "question"), source="ACQO App. C, Fig. 7a + one worked example (ours)",
    meta={"fmt": "acqo", "max_subqueries": 3}))
