"""RL-QR prompts (RL-QR Sec. 3.1 Table 1 and Sec. 3.2), in our own words.

``rlqr/rewrite``: rewrite a query for the target index, answer inside
``<answer>...</answer>`` with nothing around it (the format/redundancy penalty of
Eq. 6 counts text outside the tags); parse with ``fmt="plain"``.
``rlqr/synthesis``: index-aligned query synthesis from one document: imagine a
situation that needs the document, ask a question fitting it, answer it from the
document; leave the fields empty when the document does not support such a situation.
Its reply is a JSON object (``meta["output"]``, keys in ``meta["keys"]``) read by the
synthesis step, not a query: ``meta["fmt"]`` is ``plain`` only because every template
names a :mod:`qrlib.generation.parsing` format (there is no JSON-object format there).
"""
from __future__ import annotations

from qrlib.generation.prompts import PromptTemplate, register

register(PromptTemplate(
    name="rlqr/rewrite",
    system=("You rewrite user queries so that a search engine over a fixed document index "
            "returns the document the user needs at the top."),
    user=("User query: {query}\n\n"
          "Write the rewritten query inside <answer> </answer> tags and write nothing "
          "outside the tags."),
    fields=("query",), source="RL-QR Sec. 3.2, Eq. 5-6",
    meta={"fmt": "plain"}))

register(PromptTemplate(
    name="rlqr/synthesis",
    system=("You create realistic search requests that can only be satisfied by one "
            "specific document."),
    user=("Document:\n{document}\n\nStudy the document, then:\n"
          "1. Describe a situation in which someone would need the information in this "
          "document.\n"
          "2. Write the question that person would ask in that situation.\n"
          "3. Answer the question using only the document.\n"
          "Reply as JSON: {{\"scenario\": \"...\", \"question\": \"...\", \"answer\": \"...\"}}. "
          "If the document does not contain enough information to support such a "
          "situation, reply with empty strings for all three fields."),
    fields=("document",), source="RL-QR Sec. 3.1, Table 1",
    meta={"fmt": "plain", "output": "json", "keys": ("scenario", "question", "answer")}))
