"""Log-probabilities of GRPO rollouts with each group's prompt computed once.

The G rollouts of a GRPO group share their prompt token for token. TRL's log-prob pass runs
the backbone over ``G x (prompt + completion)`` tokens; here each distinct prompt runs once
with its key/value cache kept, the cache is gathered back to one row per rollout
(``DynamicCache.batch_select_indices``, differentiable) and only the completions run on top
of it. Rows may come in any order (TRL shuffles the batch). The
result is the same function of the weights (positions, masks and the causal structure are
those of the concatenated sequence), so values and gradients agree with TRL's pass up to
floating-point summation order; a test checks both. With prompts of ~140 tokens and
completions of ~30, the backbone sees about a quarter of the tokens.
"""
from __future__ import annotations

from typing import Any

from qrlib.core.errors import QrlibError


def prompt_groups(input_ids: Any, attention_mask: Any, prompt_len: int) -> tuple[Any, Any] | None:
    """Rows with the same prompt (tokens and mask of the first ``prompt_len`` positions), in
    any order (TRL shuffles a generation batch before the update): ``(first, inverse)``,
    one representative row per distinct prompt and each row's prompt index; ``None``
    when no two rows share a prompt (nothing to save)."""
    import torch

    if prompt_len < 1:
        return None
    key = torch.cat([input_ids[:, :prompt_len], attention_mask[:, :prompt_len]], dim=1)
    uniq, inverse = torch.unique(key, dim=0, return_inverse=True)
    if uniq.size(0) == input_ids.size(0):
        return None
    first = torch.empty(uniq.size(0), dtype=torch.long, device=input_ids.device)
    first[inverse] = torch.arange(input_ids.size(0), device=input_ids.device)
    return first, inverse


def causal_lm_parts(model: Any) -> tuple[Any, Any]:
    """(backbone, lm_head) of a causal LM, through PEFT and accelerate wrappers."""
    inner = model
    while hasattr(inner, "module") and not hasattr(inner, "get_output_embeddings"):
        inner = inner.module  # DDP / accelerate wrappers
    if hasattr(inner, "get_base_model"):
        inner = inner.get_base_model()
    return getattr(inner, inner.base_model_prefix), inner.get_output_embeddings()


def shared_prompt_logps(model: Any, input_ids: Any, attention_mask: Any, logits_to_keep: int,
                        groups: tuple[Any, Any], *, temperature: float = 1.0,
                        compute_entropy: bool = False,
                        rows_per_chunk: int = 8) -> tuple[Any, Any]:
    """Per-token log-probs (and entropies) of the last ``logits_to_keep`` tokens of each row,
    each distinct prompt run once. ``groups`` is :func:`prompt_groups`'s ``(first,
    inverse)``. Logits are divided by ``temperature`` as TRL's are."""
    import torch

    first_rows, inverse = groups
    backbone, lm_head = causal_lm_parts(model)
    if getattr(backbone, "gradient_checkpointing", False) and backbone.training:
        raise QrlibError("the shared-prompt pass needs the prompt's cache, which gradient "
                         "checkpointing turns off; disable one of them")
    p = input_ids.size(1) - logits_to_keep
    first = backbone(input_ids=input_ids[first_rows, :p],
                     attention_mask=attention_mask[first_rows, :p], use_cache=True)
    cache = first.past_key_values
    cache.batch_select_indices(inverse)  # each row's prompt cache (a differentiable gather)
    comp = input_ids[:, p:]
    second = backbone(input_ids=comp, attention_mask=attention_mask, past_key_values=cache,
                      use_cache=True)
    # hidden state before each completion token: the prompt's last, then the completion's
    hidden = torch.cat([first.last_hidden_state[inverse, -1:],
                        second.last_hidden_state[:, :-1]], dim=1)
    logps, ents = [], []
    for s in range(0, hidden.size(0), rows_per_chunk):  # bounds the (rows, T, vocab) logits
        logits = lm_head(hidden[s:s + rows_per_chunk]).float() / temperature
        lsm = torch.log_softmax(logits, dim=-1)
        logps.append(lsm.gather(-1, comp[s:s + rows_per_chunk, :, None])[..., 0])
        if compute_entropy:  # a logged statistic: no gradient
            with torch.no_grad():
                ents.append(-(lsm.exp() * lsm).sum(-1))
    return torch.cat(logps), (torch.cat(ents) if compute_entropy else None)
