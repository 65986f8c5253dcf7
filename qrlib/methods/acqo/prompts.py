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
    "- When you write several queries, put them in the same string, separated by %%.\n")

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
# only the rules never splits a question (a probe: 1.0 sub-queries on average), so GRPO
# sees groups of near-identical copies with no reward spread. The example seeds
# exploration; RL then decides when to split and what to put in each part. Ours and
# deliberately off-domain (no film/person question of the test sets), no guessed answers.
#
# A few-shot variant with one example of each length (one, three and two queries, in that
# order), so that no fixed number of sub-queries is the pattern to copy: with the one-shot
# three-part example the untrained 0.5B model wrote 3 sub-queries for 434 of 516 test
# questions and ACQO's trained model for 512, so the adaptive choice never showed.
_SHOTS = {
    "single": ("When was the Eiffel Tower completed?",
               "Eiffel Tower construction completed year"),
    "three": ("Which was founded first, the University of Oslo or Uppsala University?",
              "Which was founded first, the University of Oslo or Uppsala University?"
              "%%University of Oslo founded%%Uppsala University founded"),
    "two": ("Which river is longer, the Danube or the Rhine?",
            "Danube river length%%Rhine river length"),
}


def _shots(keys: tuple[str, ...]) -> str:
    head = "Example:\n" if len(keys) == 1 else "Examples:\n"
    return head + "".join(f"Current question:\n{_SHOTS[k][0]}\n"
                          f"{{{{\"query\": \"{_SHOTS[k][1]}\"}}}}\n\n" for k in keys)


for _name, _keys, _what in (("oneshot", ("three",), "one worked example"),
                            ("fewshot", ("single", "three", "two"),
                             "examples of 1, 3 and 2 queries")):
    register(PromptTemplate(
        name=f"acqo/decompose-{_name}", system=_SYSTEM,
        user=_USER.replace("{rules}", _RULES_COMMON + _RULES_DECOMPOSE + "\n" + _shots(_keys)),
        fields=("context", "question"), source=f"ACQO App. C, Fig. 7a + {_what} (ours)",
        meta={"fmt": "acqo", "max_subqueries": 3}))
