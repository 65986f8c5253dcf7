"""Log-probabilities of GRPO rollouts with each group's prompt computed once (issue 23 item 6).

The G rollouts of a GRPO group share their prompt token for token. TRL's log-prob pass runs
the backbone over ``G x (prompt + completion)`` tokens; here the prompt runs once per group
with its key/value cache kept, the cache is repeated G times (``DynamicCache.
batch_repeat_interleave``, differentiable) and only the completions run on top of it. The
result is the same function of the weights (positions, masks and the causal structure are
those of the concatenated sequence), so values and gradients agree with TRL's pass up to
floating-point summation order; a test checks both. With prompts of ~140 tokens and
completions of ~30, the backbone sees about a quarter of the tokens.
"""
from __future__ import annotations

from typing import Any


def groups_share_prompt(input_ids: Any, attention_mask: Any, prompt_len: int, g: int) -> bool:
    """Whether every run of ``g`` consecutive rows has the same prompt tokens and mask."""
    n = input_ids.size(0)
    if g < 2 or n % g or prompt_len < 1:
        return False
    ids = input_ids[:, :prompt_len].reshape(n // g, g, prompt_len)
    mask = attention_mask[:, :prompt_len].reshape(n // g, g, prompt_len)
    return bool((ids == ids[:, :1]).all() and (mask == mask[:, :1]).all())


def causal_lm_parts(model: Any) -> tuple[Any, Any]:
    """(backbone, lm_head) of a causal LM, through PEFT and accelerate wrappers."""
    inner = model
    while hasattr(inner, "module") and not hasattr(inner, "get_output_embeddings"):
        inner = inner.module  # DDP / accelerate wrappers
    if hasattr(inner, "get_base_model"):
        inner = inner.get_base_model()
    return getattr(inner, inner.base_model_prefix), inner.get_output_embeddings()


def shared_prompt_logps(model: Any, input_ids: Any, attention_mask: Any, logits_to_keep: int,
                        g: int, *, temperature: float = 1.0, compute_entropy: bool = False,
                        rows_per_chunk: int = 8) -> tuple[Any, Any]:
    """Per-token log-probs (and entropies) of the last ``logits_to_keep`` tokens of each row,
    each group's prompt run once. Rows ``[i*g, (i+1)*g)`` must share the prompt
    (:func:`groups_share_prompt`). Logits are divided by ``temperature`` as TRL's are."""
    import torch

    backbone, lm_head = causal_lm_parts(model)
    p = input_ids.size(1) - logits_to_keep
    uniq_ids, uniq_mask = input_ids[::g, :p], attention_mask[::g, :p]
    first = backbone(input_ids=uniq_ids, attention_mask=uniq_mask, use_cache=True)
    cache = first.past_key_values
    cache.batch_repeat_interleave(g)
    comp = input_ids[:, p:]
    second = backbone(input_ids=comp, attention_mask=attention_mask, past_key_values=cache,
                      use_cache=True)
    # hidden state before each completion token: the prompt's last, then the completion's
    hidden = torch.cat([first.last_hidden_state[:, -1:].repeat_interleave(g, 0),
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
