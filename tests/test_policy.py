"""Policy loading (offline GGUF -> cached safetensors), assembly checks, generation."""
from __future__ import annotations

import hashlib

import pytest

from qrlib.generation import policy, rewrite
from qrlib.core.errors import QrlibError


@pytest.fixture(scope="module")
def smol():
    return policy.load_policy("smollm2")


def _fake_parts(tmp_path, monkeypatch, chunks):
    files = []
    for i, c in enumerate(chunks):
        f = tmp_path / f"part{i}.bin"
        f.write_bytes(c)
        files.append(f)
    monkeypatch.setattr(policy, "_package_file", lambda pkg, rel: files[int(pkg)])
    monkeypatch.setenv("QRLIB_CACHE", str(tmp_path / "cache"))
    return [(str(i), "x") for i in range(len(chunks))]


def test_split_gguf_is_assembled_in_order_and_verified(tmp_path, monkeypatch):
    parts = _fake_parts(tmp_path, monkeypatch, [b"abc", b"def"])
    # sha256("abcdef"), worked out independently of the code under test
    good = "bef57ec7f53a6d40beb640a780a639c83bc29ac8a9816f1fc6c5c6dcd93c4721"
    assert hashlib.sha256(b"abcdef").hexdigest() == good
    spec = policy.OfflineModel("fake", "x/y", "fake.gguf", tuple(parts), good, 6)
    monkeypatch.setitem(policy.OFFLINE_MODELS, "fake", spec)
    path = policy.gguf_path("fake")
    assert path.read_bytes() == b"abcdef"
    assert path.parent == tmp_path / "cache" / "models" / "gguf"


def test_split_gguf_mismatch_is_one_line_error_and_leaves_nothing(tmp_path, monkeypatch):
    parts = _fake_parts(tmp_path, monkeypatch, [b"def", b"abc"])  # wrong order
    good = hashlib.sha256(b"abcdef").hexdigest()
    spec = policy.OfflineModel("fake2", "x/y", "fake2.gguf", tuple(parts), good, 6)
    monkeypatch.setitem(policy.OFFLINE_MODELS, "fake2", spec)
    with pytest.raises(QrlibError) as err:
        policy.gguf_path("fake2")
    assert "\n" not in str(err.value) and "sha256" in str(err.value)
    assert not (tmp_path / "cache" / "models" / "gguf" / "fake2.gguf").exists()
    assert not list((tmp_path / "cache" / "models" / "gguf").glob("*.tmp"))


def test_real_packages_verify():
    assert policy.gguf_path("smollm2").stat().st_size == 98362432
    qwen = policy.OFFLINE_MODELS["qwen2.5-coder-0.5b"]
    assert sum(1 for _ in qwen.parts) == 6 and qwen.size == 491_400_064


def test_unknown_model_is_a_clear_error():
    with pytest.raises(QrlibError, match="cannot load model"):
        policy.load_policy("no-such-org/no-such-model-xyz")


def test_dequantised_cache_is_plain_checkpoint(smol):
    model, tok = smol
    d = policy.dequantised_dir("smollm2")
    assert (d / "model.safetensors").exists() and (d / "tokenizer.json").exists()
    import json

    cfg = json.loads((d / "config.json").read_text())
    assert "quantization_config" not in cfg
    assert tok.padding_side == "left" and tok.pad_token is not None


def test_generate_shapes_budget_and_left_padding(smol):
    model, tok = smol
    short = tok.apply_chat_template([{"role": "user", "content": "Say hi."}], tokenize=False,
                                    add_generation_prompt=True)
    long = tok.apply_chat_template(
        [{"role": "user", "content": "Write a long search query about vitamin D, bone density "
                                     "and fracture risk in older adults."}],
        tokenize=False, add_generation_prompt=True)
    alone = policy.generate(model, tok, [short], max_new_tokens=6)
    batch = policy.generate(model, tok, [long, short], max_new_tokens=6)
    assert len(batch) == 2
    # left padding: the short prompt's greedy continuation does not change inside a batch
    assert batch[1] == alone[0]
    for text in batch:
        assert len(tok(text, add_special_tokens=False)["input_ids"]) <= 6
    sampled = policy.generate(model, tok, [short, long], max_new_tokens=4, do_sample=True,
                              temperature=1.0, num_return_sequences=3, seed=1)
    assert len(sampled) == 6


def test_generate_rejects_bad_arguments(smol):
    model, tok = smol
    with pytest.raises(QrlibError):
        policy.generate(model, tok, "one string", max_new_tokens=4)
    with pytest.raises(QrlibError):
        policy.generate(model, tok, ["x"], max_new_tokens=0)


def test_rewrite_queries_expand_and_fallback(smol, monkeypatch):
    model, tok = smol
    outs = iter([['answer"}</answer>', "garbage with no json"]])
    monkeypatch.setattr(policy, "generate", lambda *a, **k: next(outs))
    df = rewrite.rewrite_queries(model, tok, {"q1": "claim one", "q2": "claim two"},
                                {"user": "{query}"}, fmt="deepretrieval-nothink",
                                prefill='<answer>{"query": "extra ', mode="expand",
                                progress=False)
    assert df.loc[0, "rewrite"] == "extra answer"
    assert df.loc[0, "search_text"] == "claim one extra answer"
    assert bool(df.loc[0, "format_ok"]) and bool(df.loc[0, "modified"])
    assert not bool(df.loc[1, "format_ok"])


def test_dequantised_cache_is_verified_and_rebuilt(tmp_path, monkeypatch, capsys):
    """A truncated or partly overwritten model.safetensors (which loaded and generated empty
    text) is found by the cache's recorded sizes and sha256s and rebuilt, with a note."""
    import os

    import numpy as np
    from safetensors.numpy import save_file

    monkeypatch.setenv("QRLIB_CACHE", str(tmp_path / "cache"))
    builds = []

    def fake_write(name, folder):  # stands in for the slow GGUF dequantisation
        builds.append(name)
        (folder / "config.json").write_text('{"model_type": "fake"}\n')
        save_file({"w": np.arange(4096, dtype=np.float32)}, str(folder / "model.safetensors"))

    monkeypatch.setattr(policy, "_write_dequantised", fake_write)
    d = policy.ensure_dequantised("smollm2")
    weights = d / "model.safetensors"
    good = weights.read_bytes()
    assert builds == ["smollm2"] and (d / policy.MANIFEST).exists()
    assert policy.ensure_dequantised("smollm2") == d and len(builds) == 1  # verified, reused

    def bump_mtime():
        st = weights.stat()
        os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))

    with open(weights, "r+b") as fh:  # partly overwritten in place: same size
        fh.seek(len(good) // 2)
        fh.write(b"\xff" * 64)
    bump_mtime()
    capsys.readouterr()
    assert policy.ensure_dequantised("smollm2") == d and len(builds) == 2
    err = capsys.readouterr().err
    assert "no longer matches its recorded sha256" in err and str(weights) in err
    assert weights.read_bytes() == good
    weights.write_bytes(good[:100])  # truncated
    policy.ensure_dequantised("smollm2")
    assert len(builds) == 3 and "(truncated?)" in capsys.readouterr().err
    bump_mtime()  # touched but intact: hashed once, not rebuilt
    policy.ensure_dequantised("smollm2")
    assert len(builds) == 3
    (d / policy.MANIFEST).unlink()  # a cache written by an older qrlib has no record
    policy.ensure_dequantised("smollm2")
    assert len(builds) == 4 and "no integrity record" in capsys.readouterr().err
    assert [p.name for p in d.parent.glob(".smollm2.*")] == [".smollm2.lock"]  # no temp folders

    def sentinel(name):
        raise RuntimeError(f"verified {name}")

    monkeypatch.setattr(policy, "ensure_dequantised", sentinel)
    with pytest.raises(RuntimeError, match="verified smollm2"):  # load_policy goes through it
        policy.load_policy("smollm2")


def test_rewrite_queries_lives_in_its_own_module():
    assert not hasattr(policy, "rewrite_queries")
    assert rewrite.rewrite_queries.__module__ == "qrlib.generation.rewrite"


def test_merged_adapter_is_exact_in_fp32_and_merge_false_keeps_the_side_path(tmp_path):
    """Folding B·A into fp32 weights gives the unmerged model's logits (what
    benchmarks/bench_eval_precision.py relies on for its fp32-merged path)."""
    import torch
    from peft import LoraConfig, PeftModel, get_peft_model

    torch.manual_seed(0)
    base, tok = policy.load_policy("smollm2")
    peft = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                           lora_dropout=0.0))
    with torch.no_grad():
        for n, p in peft.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 1e-3)
    peft.save_pretrained(tmp_path)
    ids = tok(["Vitamin D lowers fracture risk in older adults"], return_tensors="pt")
    unmerged, _ = policy.load_policy("smollm2", adapter=tmp_path, merge=False)
    merged, _ = policy.load_policy("smollm2", adapter=tmp_path)
    plain, _ = policy.load_policy("smollm2")
    assert isinstance(unmerged, PeftModel) and not isinstance(merged, PeftModel)
    with torch.no_grad():
        lu, lm, lp = (m(**ids).logits for m in (unmerged, merged, plain))
    assert torch.allclose(lu, lm, atol=1e-4)
    assert (lu - lp).abs().max() > 1e-3  # the adapter does change the logits
