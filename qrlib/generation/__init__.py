"""Generation layer: models, prompts and what their completions say.

* :mod:`~qrlib.generation.policy`: loading a policy (base model + adapter), ``generate``;
* :mod:`~qrlib.generation.engine`: the generation back-ends (HF ``generate``, vLLM);
* :mod:`~qrlib.generation.prompts`: the prompt-template registry (``PromptTemplate``,
  ``register``, ``get``, ``render``, ``render_prompt``);
* :mod:`~qrlib.generation.parsing`: the completion-format registry and the generic parse
  API (``parse_completion``, ``ParseResult``) with the scanners formats are built from;
* :mod:`~qrlib.generation.rewrite`: rewriting a query set with a policy and a prompt.

The templates and formats themselves belong to the papers (``qrlib/methods/<paper>/``),
which register them when imported. No re-exports: import the module you need.
"""
