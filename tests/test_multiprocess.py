"""Data-parallel training on the CPU (issue 43 item 2): two processes (gloo) run a short
GRPO training through ``qrlib.rl.train`` and the test checks what data parallelism must
guarantee: each rank generates for different prompts, both ranks end with the same
adapter, and the run's log is written once.

The launcher is ``torchrun --nproc_per_node 2`` with ``ACCELERATE_USE_CPU=true``, which is
what ``accelerate launch --multi_gpu`` runs on GPUs; ``accelerate launch --cpu
--num_processes 2`` starts a single process unless MPI's ``mpirun`` is installed (accelerate
1.15's multi-CPU path), so it cannot test data parallelism here."""
from __future__ import annotations

import csv
import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

DRIVER = textwrap.dedent('''
    import json, os, sys
    from qrlib.rl import train as T

    out = sys.argv[1]
    rank = int(os.environ.get("RANK", "0"))

    class Env:
        """Reward = words of the rewrite; records which questions this rank saw."""
        def __init__(self):
            self.records = []
        def __call__(self, prompts, completions, qid=None, **cols):
            with open(os.path.join(out, f"rank{rank}.qids"), "a") as fh:
                fh.write(" ".join(sorted(set(qid))) + "\\n")
            r = [float(len(c.split())) for c in completions]
            self.records += [{"format_ok": True, "reward": x} for x in r]
            return r

    queries = {str(i): q for i, q in enumerate(["vitamin d bone", "aspirin heart attack",
               "statin side effects", "migraine treatment", "sleep and memory",
               "coffee and liver", "zinc common cold", "exercise depression"])}
    cfg = T.load_config({"name": "ddp", "run_dir": out, "model": "smollm2",
                         "fmt": "plain", "prompt": {"user": "Rewrite: {query}"},
                         "max_steps": 3, "prompts_per_step": 1, "num_generations": 2,
                         "max_completion_length": 6, "save_steps": 3, "seed": 0,
                         "mask_truncated_completions": False,  # 6 tokens cut most rollouts
                         "learning_rate": 1e-3})
    s = T.train(cfg, env=Env(), queries=queries)
    with open(os.path.join(out, f"rank{rank}.json"), "w") as fh:
        json.dump(s, fh)
''')


@pytest.mark.slow
def test_two_cpu_processes_train_one_adapter(tmp_path):
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent))
    assert torchrun, "torch's launcher is part of the install"
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1",
           "QRLIB_ROLLOUTS": "hf", "ACCELERATE_USE_CPU": "true", "PYTHONPATH": str(REPO)}
    with socket.socket() as sock:  # a free port for the rendezvous (0 makes torchrun hang)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    res = subprocess.run([torchrun, "--nproc_per_node", "2", "--master_port", str(port),
                          str(driver), str(tmp_path)],
                         capture_output=True, text=True, env=env, timeout=1200, cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    # the same adapter on both ranks after the run (DDP averages the gradients)
    assert ranks[0]["adapter_sha256"] == ranks[1]["adapter_sha256"]
    assert ranks[0]["steps"] == ranks[1]["steps"] == 3
    # each rank generated for its own prompts at every step
    seen = [(tmp_path / f"rank{r}.qids").read_text().split("\n")[:-1] for r in (0, 1)]
    assert len(seen[0]) == len(seen[1]) == 3
    assert all(a != b for a, b in zip(*seen)), seen
    # the log is written once: one row per step, one summary
    run = tmp_path / "rl" / "ddp"
    with open(run / "log.csv") as fh:
        log = list(csv.DictReader(fh))
    assert [int(r["step"]) for r in log] == [1, 2, 3]
    assert float(log[-1]["kl"]) > 0  # the policy moved: equal adapters are not untouched ones
    assert ranks[0]["processes"] == 2 and ranks[0]["shared_prompt_passes"] == 0
    assert json.loads((run / "summary.json").read_text())["steps"] == 3
    assert (run / "adapter" / "adapter_config.json").exists()
