"""Decomposition prompts of the bandit study (Petcu et al. 2025, Appendix A.1, Figures 6-7).

Rewritten in our own words; the required elements are kept: the request as input, at most
``n_queries`` web-style search queries, (1) broad definitional queries for the request and
its key entities or (2) narrow expert-level queries, each covering one sub-aspect, and the
output as a bare JSON list of strings. The paper's optional context and current-date slots
are dropped (our requests are self-contained multi-hop questions).
"""
from __future__ import annotations

from qrlib.generation.prompts import PromptTemplate, register

_FORMAT = ("Reply with a JSON array of strings and nothing else, for example "
           '["first query", "second query"].')

PROBLEM_DEFINITION = register(PromptTemplate(
    name="bandit/problem-definition",
    system=("You help a search system by turning a complicated question into simple web "
            "search queries. The queries must be broad and encyclopedic: together they "
            "should explain what the question is about and describe every important entity "
            "(person, place, work, organisation) it mentions. Phrase each one the way a "
            "person would type it into a search engine; avoid narrow wording."),
    user=("Question: {request}\n\nWrite no more than {n_queries} search queries. " + _FORMAT),
    fields=("request", "n_queries"),
    source="Petcu et al. 2025, Appendix A.1, Figure 6 (problem-definition queries)",
))

SPECIALISED = register(PromptTemplate(
    name="bandit/specialised",
    system=("You are an experienced research assistant. For the question you are given, "
            "write targeted search queries that dig into precise details an ordinary "
            "reader would not know. Each query should follow up on one concrete aspect "
            "of the question (a fact, a date, a relation between entities)."),
    user=("Question: {request}\n\nWrite no more than {n_queries} specific search queries. "
          + _FORMAT),
    fields=("request", "n_queries"),
    source="Petcu et al. 2025, Appendix A.1, Figure 7 (specialised-information queries)",
))
