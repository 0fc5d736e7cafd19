"""Two CPU processes (gloo) training AdaGRPOTrainer: the processes agree on the number of rounds and training completes,
with TRL's plain generation and with TRL's vLLM server-mode code (HTTP client faked; see trl_two_process.py).

``trl_two_process.py`` gives one process prompts that exit after one round and the other prompts that never exit
(all ``max_rounds`` rounds). Without the lock-step protocol of ``TRLGenerator`` the first process would leave the
sampling loop and enter TRL's next collective while the second still sampled -- a hang (caught here by the timeout)
or a collective mismatch.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("trl")

SCRIPT = Path(__file__).with_name("trl_two_process.py")
REPO_ROOT = Path(__file__).resolve().parents[2]
MAX_ROUNDS = 4


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _launch(tmp_path, *script_args) -> None:
    accelerate = shutil.which("accelerate")
    if accelerate is None:
        pytest.skip("the accelerate launcher is not on PATH")
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1",
               OMP_NUM_THREADS="1", TRL_EXPERIMENTAL_SILENCE="1",
               PYTHONPATH=os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]))
    # --multi_gpu makes accelerate start the processes with torch.distributed.run; the script's use_cpu=True makes
    # them train on the CPU with the gloo backend (no GPU is needed).
    cmd = [accelerate, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
           "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", str(_free_port()),
           str(SCRIPT), str(tmp_path), *script_args]
    try:
        proc = subprocess.run(cmd, env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired as err:
        pytest.fail(f"the two-process run did not finish in 300 s (a collective hang?)\n{err.stderr}")
    assert proc.returncode == 0, proc.stderr[-4000:]


@pytest.mark.slow
def test_two_processes_agree_on_rounds(tmp_path):
    _launch(tmp_path, "rounds")
    results = [json.loads((tmp_path / f"rounds-rank{i}.json").read_text()) for i in range(2)]
    for mode in ("plain", "server"):
        runs = [r[mode] for r in results]
        assert [r["num_processes"] for r in runs] == [2, 2]
        assert [r["backend"] for r in runs] == ["gloo", "gloo"]
        assert [r["global_step"] for r in runs] == [2, 2]  # training completed on both processes
        assert all(r["params_changed"] for r in runs)
        for step in range(2):
            local = sorted(r["history"][step]["rounds_local"] for r in runs)
            joined = [r["history"][step]["rounds_in_step"] for r in runs]
            # One process needed 1 round, the other all of them; both took part in the same number of rounds.
            assert local == [1, MAX_ROUNDS], mode
            assert joined == [MAX_ROUNDS, MAX_ROUNDS], mode
            # Server mode is collective: the early process padded the 3 rounds it idled through with as many rows as
            # the other needed (2 prompts x 2 samples). Plain generation under DDP is not: it idles without generating.
            expected_filler = [0, 3 * 2 * 2] if mode == "server" else [0, 0]
            assert sorted(r["history"][step]["filler_rows"] for r in runs) == expected_filler, mode
        assert runs[0]["logged_rounds"] == runs[1]["logged_rounds"] == [MAX_ROUNDS, MAX_ROUNDS]

    # vLLM server mode: only the main process talks to the server -- one request per round, holding both processes'
    # rows (2 prompts x 2 samples each, the idle process's padded to match), and one weight sync per step.
    main, other = results[0]["server"], results[1]["server"]
    assert other["client_calls"] is None
    assert main["client_calls"] == [{"num_prompts": 2 * 2 * 2, "n": 1}] * (2 * MAX_ROUNDS)
    assert main["weight_syncs"] == 2


@pytest.mark.slow
def test_two_processes_share_one_est_memory(tmp_path):
    """Est on two processes: each process's rows are its own prompts' allocation (16 rows, 2 prompts), the memories
    are identical after every step, and a prompt drawn by the other process next uses the estimate its last visit
    left -- whichever process made that visit."""
    from reinforce_ada.config import SamplerConfig
    from reinforce_ada.sampling.estimate import est_memory

    _launch(tmp_path, "est")
    runs = [json.loads((tmp_path / f"est-rank{i}.json").read_text())["est"] for i in range(2)]
    assert [r["global_step"] for r in runs] == [6, 6]
    steps = [r["steps"] for r in runs]
    moved = 0
    last_rank: dict[str, int] = {}
    for t in range(6):
        assert steps[0][t]["memory"] == steps[1][t]["memory"], f"the memories differ after step {t + 1}"
        for rank in (0, 1):
            step = steps[rank][t]
            assert step["rows"] == step["loss_rows"] == sum(step["counts"]) == 16 and len(step["keys"]) == 2
            if t == 0:
                continue
            memory = est_memory(SamplerConfig.reinforce_ada_est())  # Est's settings; the state brings the counts
            memory.load_state_dict(steps[rank][t - 1]["memory"])
            assert step["p_hat"] == [memory.pass_rate(k) for k in step["keys"]]
            for key in step["keys"]:
                moved += last_rank.get(key, rank) != rank
        for rank in (0, 1):
            last_rank.update({key: rank for key in steps[rank][t]["keys"]})
    assert moved > 0, "no prompt moved between the processes: the test shows nothing"
    assert sorted({k for s in steps[0] + steps[1] for k in s["keys"]}) == sorted(steps[0][-1]["memory"]["entries"])
