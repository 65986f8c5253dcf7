"""Prompt templates, one registry for every method and variant.

Each template is registered under a name such as ``acqo/decompose`` or
``deepretrieval/bm25-think`` and rendered through the tokenizer's own chat template by
:func:`render`, so no model-specific formatting hides in the strings. Method modules
(``acqo``, ``deepretrieval``, ``sage``, ``rlqr``, ``bandit``) register their templates on
import; all of them are imported here.
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Any

from qrlib.errors import QrlibError


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


for _mod in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_mod.name}")
