"""Prompt templates, one registry for every method and variant.

Each template is registered under a name such as ``acqo/decompose`` or
``deepretrieval/bm25-think`` and rendered through the tokenizer's own chat template by
:func:`render`, so no model-specific formatting hides in the strings. The templates
themselves belong to the papers: ``qrlib/methods/<paper>/prompts.py`` registers them when
its paper is imported (DMQR-RAG's and the generic rewrite prompt sit with SAGE, which
compares against them). :func:`get` imports every paper on a miss
(:func:`qrlib.core.registry.load_methods`); :data:`REGISTRY` holds what has been
registered so far, i.e. everything once :mod:`qrlib.methods.registry` is imported.
"""
from __future__ import annotations

import string
from dataclasses import dataclass, field
from typing import Any

from qrlib.core.errors import QrlibError
from qrlib.core.registry import load_methods


@dataclass(frozen=True)
class PromptTemplate:
    """A system and a user message with ``{placeholders}``; ``fields`` lists them."""

    name: str
    system: str
    user: str
    fields: tuple[str, ...] = ()
    source: str = ""  # paper and section the required elements come from
    meta: dict[str, Any] = field(default_factory=dict)

    def messages(self, **values: Any) -> list[dict[str, str]]:
        missing = [f for f in self.fields if f not in values]
        if missing:
            raise QrlibError(f"prompt {self.name}: missing field(s) {missing}; "
                             f"required: {list(self.fields)}")
        msgs = []
        if self.system:
            msgs.append({"role": "system", "content": self.system.format(**values)})
        msgs.append({"role": "user", "content": self.user.format(**values)})
        return msgs


REGISTRY: dict[str, PromptTemplate] = {}


def register(template: PromptTemplate) -> PromptTemplate:
    """Add a template to the registry (names are unique)."""
    if template.name in REGISTRY:
        raise QrlibError(f"prompt {template.name!r} is registered twice")
    REGISTRY[template.name] = template
    return template


def get(name: str) -> PromptTemplate:
    """The template registered as ``name`` (every paper is imported first on a miss)."""
    if name not in REGISTRY:
        load_methods()
    if name not in REGISTRY:
        raise QrlibError(f"unknown prompt {name!r}; accepted: {sorted(REGISTRY)}")
    return REGISTRY[name]


def render(name: str | PromptTemplate, tokenizer: Any = None, *,
           add_generation_prompt: bool = True, **values: Any) -> str | list[dict[str, str]]:
    """Messages of template ``name`` (a registered name or an unregistered
    :class:`PromptTemplate`); as text through ``tokenizer.apply_chat_template`` when a
    tokenizer is given, else as the list of chat messages."""
    template = name if isinstance(name, PromptTemplate) else get(name)
    msgs = template.messages(**values)
    if tokenizer is None:
        return msgs
    return tokenizer.apply_chat_template(msgs, tokenize=False,
                                         add_generation_prompt=add_generation_prompt)


def render_prompt(prompt: str | PromptTemplate | dict[str, str], tokenizer: Any,
                  query: str | None = None, prefill: str = "", **values: Any) -> str:
    """Chat-formatted prompt text (through ``tokenizer``'s chat template) followed by
    ``prefill``, the start of the assistant's answer (e.g. ``{"query": "``).

    ``prompt`` is a registered name, a :class:`PromptTemplate`, or an inline
    ``{"system": ..., "user": ...}`` mapping whose fields are the ``{placeholders}`` of its
    user message. ``query`` is a shorthand for ``values["query"]``.
    """
    if query is not None:
        values.setdefault("query", query)
    return str(render(as_template(prompt), tokenizer, **values)) + prefill


def as_template(prompt: str | PromptTemplate | dict[str, str]) -> PromptTemplate:
    """A :class:`PromptTemplate` from a registered name, a template or an inline
    ``{"system", "user"}`` mapping (fields read from the user message's placeholders)."""
    if isinstance(prompt, PromptTemplate):
        return prompt
    if isinstance(prompt, dict):
        if "user" not in prompt:
            raise QrlibError("an inline prompt needs a 'user' message (and optionally 'system')")
        text = (prompt.get("system") or "") + (prompt["user"] or "")
        fields = tuple(dict.fromkeys(f for _, f, _, _ in string.Formatter().parse(text) if f))
        return PromptTemplate("inline", prompt.get("system") or "", prompt["user"], fields=fields)
    return get(prompt)
