"""SAGE prompts (SAGE Sec. 2.2, Table 4, App. A.1 Fig. 5), in our own words.

Required elements kept: the five strategies (1 semantic expansion, 2 entity
disambiguation, 3 sub-question decomposition, 4 concise rewriting, 5 neutralised claim
reformulation), reasoning in ``<think>`` tags, and the answer as JSON
``{"query": ..., "strategy": 1-5}`` inside ``<answer>`` tags; name entities explicitly,
include intermediate entities, do not insert guessed answers. Two variants (SAGE Sec. 4.3,
Table 3): ``sage/proactive`` pushes the model to try varied strategies and to change the
query; ``sage/conservative`` lets it keep the original when no rewrite helps.
"""
from __future__ import annotations

from qrlib.generation.prompts import PromptTemplate, register

STRATEGIES = {
    1: ("Semantic expansion",
        "add the related concepts, entities or context that the short query leaves out"),
    2: ("Entity disambiguation",
        "pin down ambiguous names or acronyms with role, nationality, period or domain"),
    3: ("Sub-question decomposition",
        "resolve a multi-hop question into a fully specified single-hop query, naming the "
        "intermediate entity"),
    4: ("Concise rewriting",
        "drop filler and conversational words, keep the informative keywords and names"),
    5: ("Neutralised claim reformulation",
        "turn a claim to be checked into a neutral question, so that both supporting and "
        "contradicting evidence is retrieved"),
}

_SYSTEM = ("You rewrite questions and claims into queries for a dense retrieval system "
           "used for multi-hop question answering and fact checking. Pick one of the "
           "rewriting strategies below and apply it.")

_STRATS = "\n".join(f"Strategy {i} - {name}: {desc}." for i, (name, desc) in STRATEGIES.items())

_EXAMPLES = (  # one per strategy, ours (App. A.1 Fig. 5 gives one per strategy too)
    ("flu shot effectiveness",
     "influenza vaccine effectiveness against infection and hospitalisation", 1),
    ("Mercury orbit", "orbit of the planet Mercury around the Sun", 2),
    ("Which university did the author of The Hobbit teach at?",
     "Which university did J. R. R. Tolkien, the author of The Hobbit, teach at?", 3),
    ("could you tell me how tall the mountain Everest actually is", "Mount Everest height", 4),
    ("Coffee causes dehydration.", "Does drinking coffee cause dehydration?", 5))


def _examples(think: bool) -> str:
    """The worked examples, query first and strategy second, as the paper's layout."""
    out = []
    for original, rewritten, k in _EXAMPLES:
        out.append(f"Input: {original}\n<answer>{{{{\"query\": \"{rewritten}\", "
                   f"\"strategy\": {k}}}}}</answer>")
    head = "Examples (the reasoning is left out):\n" if think else "Examples:\n"
    return head + "\n".join(out) + "\n"


_FORMAT = ("First reason about the input, step by step, between the tags <think> and "
           "</think>. Then give the rewritten query and the number of the strategy you "
           "applied, once, between the tags <answer> and </answer>, as a JSON object with "
           "the keys \"query\" and \"strategy\" (in that order).\n")

_GUIDE_COMMON = ("- Write out every entity by name (not 'the president' but the person's name).\n"
                 "- For multi-hop questions, include the intermediate entities.\n"
                 "- Never put a guessed answer into the query.\n"
                 "- The strategy number must be the one you actually applied.\n")
_PROACTIVE = ("- Vary your strategies rather than always using the same one.\n"
              "- Always produce a genuinely rewritten query; do not return the input as is.\n")
_CONSERVATIVE = ("- If the input is already a good query, you may return it unchanged "
                 "(use strategy 4).\n")

for _name, _extra, _src in (("proactive", _PROACTIVE, "SAGE App. A.1 Fig. 5; Sec. 4.3"),
                            ("conservative", _CONSERVATIVE, "SAGE Sec. 4.3, Table 3")):
    register(PromptTemplate(
        name=f"sage/{_name}", system=_SYSTEM,
        user=(f"{_STRATS}\n\n{_FORMAT}\n{_examples(True)}\nGuidelines:\n{_GUIDE_COMMON}"
              f"{_extra}\nInput: {{query}}"),
        fields=("query",), source=_src, meta={"fmt": "sage", "prefill": "<think>"}))


# --------------------------------------------------------------------------- short variants
# For the best-of-N scaling study (SAGE Sec. 3.1, Fig. 3) each strategy is also its own
# prompt, and training on a CPU may use a no-reasoning variant (``sage/guided``) with the
# paper's answer layout (query, then strategy) and the same five examples. Both answer
# ``<answer>{...}</answer>``; generation is prefilled with the opening of the JSON
# (``meta["prefill"]``) so a small model gets the layout by construction.
_ONE_STRATEGY = ("Rewrite the search query below with this strategy: <how>. Keep it one "
                 "line, name every entity, and do not add a guessed answer.\n"
                 "Reply as <answer>{{\"query\": \"...\"}}</answer>.\n\nQuery: {query}")
for _i, (_name, _desc) in STRATEGIES.items():
    register(PromptTemplate(
        name=f"sage/s{_i}", system="",
        user=_ONE_STRATEGY.replace("<how>", f"{_name.lower()} ({_desc})"),
        fields=("query",), source="SAGE Sec. 2.2, Table 4; Sec. 3.1",
        meta={"fmt": "deepretrieval-nothink", "prefill": '<answer>{"query": "',
              "family": "sage", "strategy": _i}))

_GUIDED = ("Improve the search query below for a retrieval system. Choose one strategy:\n"
           + "\n".join(f"{i} {name}: {desc}." for i, (name, desc) in STRATEGIES.items())
           + "\nName entities explicitly and never add a guessed answer. <extra>\n"
           "Reply with the rewritten query and the number of the strategy you applied.\n"
           + _examples(False) + "\nInput: {query}")
for _name, _extra, _src in (
        ("guided", "Always write a new query; do not return the input unchanged.",
         "SAGE Sec. 2.3, 2.5 (proactive), App. A.1 layout; no-reasoning variant"),
        ("guided-conservative", "If the query cannot be improved, return it unchanged.",
         "SAGE Sec. 4.3, Table 3 (conservative), App. A.1 layout; no-reasoning variant")):
    register(PromptTemplate(
        name=f"sage/{_name}", system="", user=_GUIDED.replace("<extra>", _extra),
        fields=("query",), source=_src,
        meta={"fmt": "sage", "prefill": '<answer>{"query": "'}))
