"""Shared-prompt log-prob pass (issue 23 item 6): same values and gradients as the full
pass over every prompt + completion, on a left-padded batch of two groups."""
from __future__ import annotations

import pytest

from qrlib.rl import sharedprefix as SP


def test_prompt_groups_in_any_order():
    import torch

    ids = torch.tensor([[7, 7, 7, 1], [0, 5, 6, 9], [7, 7, 7, 2], [0, 5, 6, 8]])
    mask = torch.ones_like(ids)
    first, inv = SP.prompt_groups(ids, mask, 3)
    assert inv[0] == inv[2] and inv[1] == inv[3] and inv[0] != inv[1]
    assert (ids[first[inv], :3] == ids[:, :3]).all()
    mask[3, 0] = 0  # same tokens, another mask: another prompt
    assert len(SP.prompt_groups(ids, mask, 3)[0]) == 3
    assert SP.prompt_groups(ids[:2], mask[:2], 3) is None  # nothing shared


def _full_pass(model, ids, mask, keep, temperature):
    import torch

    backbone, head = SP.causal_lm_parts(model)
    h = backbone(input_ids=ids, attention_mask=mask).last_hidden_state[:, -keep - 1:-1]
    lsm = torch.log_softmax(head(h).float() / temperature, -1)
    return lsm.gather(-1, ids[:, -keep:, None])[..., 0]


@pytest.mark.slow
def test_shared_prompt_pass_equals_the_full_pass_in_value_and_gradient():
    import torch
    from peft import LoraConfig, get_peft_model

    from qrlib.generation import policy

    model, tok = policy.load_policy("smollm2")
    peft = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0,
                                            target_modules="all-linear", task_type="CAUSAL_LM"))
    g = torch.Generator().manual_seed(0)
    for name, p in peft.named_parameters():
        if "lora_B" in name:  # a non-zero adapter, so its gradient path is exercised
            p.data = torch.randn(p.shape, generator=g) * 0.02
    pad = tok.pad_token_id
    prompts = [tok("Rewrite the query: vitamin d and bone fractures")["input_ids"],
               tok("Who directed Alien?")["input_ids"]]
    width = max(map(len, prompts))
    comps = [[tok(" bone density", add_special_tokens=False)["input_ids"],
              tok(" vitamin D supplements fracture risk trial", add_special_tokens=False)["input_ids"],
              tok(" osteoporosis", add_special_tokens=False)["input_ids"]],
             [tok(" Ridley Scott", add_special_tokens=False)["input_ids"],
              tok(" Alien 1979 director", add_special_tokens=False)["input_ids"],
              tok(" film", add_special_tokens=False)["input_ids"]]]
    keep = max(len(c) for grp in comps for c in grp)
    rows, masks = [], []
    for pr, grp in zip(prompts, comps):
        for c in grp:  # prompt left-padded, completion right-padded, as TRL lays them out
            rows.append([pad] * (width - len(pr)) + pr + c + [pad] * (keep - len(c)))
            masks.append([0] * (width - len(pr)) + [1] * len(pr) + [1] * len(c)
                         + [0] * (keep - len(c)))
    order = torch.tensor([3, 0, 5, 1, 4, 2])  # shuffled, as TRL hands the batch over
    ids, mask = torch.tensor(rows)[order], torch.tensor(masks)[order]
    cmask = mask[:, -keep:].float()
    groups = SP.prompt_groups(ids, mask, width)
    assert groups is not None and len(groups[0]) == 2

    params = [p for p in peft.parameters() if p.requires_grad]
    ref = _full_pass(peft, ids, mask, keep, 0.8)
    g_ref = torch.autograd.grad((ref * cmask).sum(), params)
    got, ent = SP.shared_prompt_logps(peft, ids, mask, keep, groups, temperature=0.8,
                                      compute_entropy=True, rows_per_chunk=2)
    g_got = torch.autograd.grad((got * cmask).sum(), params)
    assert got.shape == ref.shape and ent.shape == ref.shape
    diff = ((got - ref).abs() * cmask).max().item()
    assert diff < 1e-4, f"log-probs differ by {diff}"
    num = sum(((a - b) ** 2).sum() for a, b in zip(g_got, g_ref)) ** 0.5
    den = sum((b ** 2).sum() for b in g_ref) ** 0.5
    assert den > 0 and (num / den).item() < 1e-3, f"relative gradient error {(num / den).item()}"


def test_gradient_checkpointing_is_refused_in_one_line():
    import torch

    class Backbone(torch.nn.Module):
        gradient_checkpointing = True

    class LM(torch.nn.Module):
        base_model_prefix = "model"

        def __init__(self):
            super().__init__()
            self.model = Backbone()

        def get_output_embeddings(self):
            return None

    ids = torch.zeros((2, 3), dtype=torch.long)
    with pytest.raises(SP.QrlibError, match="gradient checkpointing"):
        SP.shared_prompt_logps(LM().train(), ids, torch.ones_like(ids), 1,
                               (torch.tensor([0]), torch.tensor([0, 0])))
