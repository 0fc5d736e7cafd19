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
import sys
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


def _run_single(tmp_path, which: str) -> None:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1",
               OMP_NUM_THREADS="1", TRL_EXPERIMENTAL_SILENCE="1",
               PYTHONPATH=os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), which], env=env, cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]


@pytest.fixture(scope="module")
def est_runs(tmp_path_factory):
    """Est, 8 steps of 4 prompts x 8 rows: on two processes (16 rows each), and on one holding the same 32 rows."""
    tmp_path = tmp_path_factory.mktemp("trl_est_processes")
    _launch(tmp_path, "est")
    _run_single(tmp_path, "est-single")
    two = [json.loads((tmp_path / f"est-rank{i}.json").read_text())["est"] for i in range(2)]
    one = json.loads((tmp_path / "est-single-rank0.json").read_text())["est"]
    assert [r["num_processes"] for r in two] == [2, 2] and one["num_processes"] == 1
    assert [r["global_step"] for r in two] == [8, 8] == [one["global_step"]] * 2
    return two, one


@pytest.mark.slow
def test_two_processes_make_one_allocation_per_step(est_runs):
    """Every step: both processes hold the step's 4 prompts and the same counts; the union of their rows is the
    allocation that est_allocation makes over the step's prompts from the memory the previous step left (32 rows);
    each process trains exactly its 16; the memories stay identical; and the allocation moved off the even split."""
    from collections import Counter

    from reinforce_ada.config import SamplerConfig
    from reinforce_ada.sampling.estimate import est_allocation, est_memory

    two, _ = est_runs
    uneven = 0
    for t in range(8):
        steps = [two[rank]["steps"][t] for rank in (0, 1)]
        assert steps[0]["keys"] == steps[1]["keys"] and steps[0]["counts"] == steps[1]["counts"]
        assert steps[0]["memory"] == steps[1]["memory"], f"the memories differ after step {t + 1}"
        assert [s["rows"] for s in steps] == [len(s["local_advantages"]) for s in steps] == [16, 16]
        memory = est_memory(SamplerConfig.reinforce_ada_est())  # Est's settings; the state brings the counts
        if t:
            memory.load_state_dict(two[0]["steps"][t - 1]["memory"])
        counts, p_hat, budget = est_allocation(memory, steps[0]["keys"], SamplerConfig.reinforce_ada_est())
        union = Counter(steps[0]["local"]) + Counter(steps[1]["local"])
        assert budget == 32 and [union[k] for k in steps[0]["keys"]] == counts.tolist() == steps[0]["counts"]
        assert p_hat.tolist() == steps[0]["p_hat"]
        uneven += len(set(counts.tolist())) > 1
    assert uneven >= 3, "the allocation hardly left the even split: the test shows little"


@pytest.mark.slow
def test_two_processes_equal_one_process_holding_the_global_batch(est_runs):
    """Counts, every row's advantage and the memory of the two-process run equal those of one process training the
    same 32-row batches, step by step; each process's loss sees its slice of the global advantages."""
    two, one = est_runs
    for t in range(8):
        single = one["steps"][t]
        for rank in (0, 1):
            step = two[rank]["steps"][t]
            assert step["keys"] == single["keys"] and step["counts"] == single["counts"], f"step {t + 1}"
            assert step["rewards"] == single["rewards"]
            assert step["advantages"] == pytest.approx(single["advantages"], abs=1e-12)
            assert step["memory"] == single["memory"]
            start = 16 * rank
            assert step["local_start"] == start
            assert step["local_advantages"] == pytest.approx(single["advantages"][start:start + 16], abs=1e-6)
        assert two[0]["logs"][t]["ada/est/alloc_max"] == one["logs"][t]["ada/est/alloc_max"]


@pytest.mark.slow
def test_a_prompt_straddling_two_processes_has_one_baseline(est_runs):
    """Where a prompt's rows lie on both processes, each process's advantages for them are (r - rbar) / sqrt(rbar +
    1e-6) with rbar the mean of the prompt's rows on both processes."""
    import math

    two, _ = est_runs
    straddled = 0
    for t in range(8):
        steps = [two[rank]["steps"][t] for rank in (0, 1)]
        rewards = steps[0]["rewards"]  # (32,) every row's, process order
        keys = steps[0]["local"] + steps[1]["local"]
        local_advantages = steps[0]["local_advantages"] + steps[1]["local_advantages"]
        for key in set(steps[0]["local"]) & set(steps[1]["local"]):
            straddled += 1
            rows = [i for i, k in enumerate(keys) if k == key]
            rbar = sum(rewards[i] for i in rows) / len(rows)
            expected = [(rewards[i] - rbar) * min(1 / math.sqrt(rbar + 1e-6), 8.0) for i in rows]
            assert [local_advantages[i] for i in rows] == pytest.approx(expected, abs=1e-5), key
    assert straddled >= 2, "no prompt straddled the processes: the test shows nothing"


@pytest.mark.slow
def test_two_processes_make_one_allocation_through_trls_vllm_server_mode(tmp_path):
    """Est's one allocation through TRL's vLLM server-mode code on two processes (gather every process's rows to the
    main process, one request, broadcast, slice; only the HTTP client faked, present on the main process only): one
    request of the step's 32 rows, one completion each, every step; the union of the processes' rows is the
    allocation over the step's prompts; the memories agree."""
    from collections import Counter

    _launch(tmp_path, "est-server")
    runs = [json.loads((tmp_path / f"est-server-rank{i}.json").read_text())["est"] for i in range(2)]
    assert [r["global_step"] for r in runs] == [4, 4]
    assert runs[0]["client_calls"] == [{"num_prompts": 32, "n": 1}] * 4 and runs[1]["client_calls"] is None
    for t in range(4):
        steps = [runs[rank]["steps"][t] for rank in (0, 1)]
        assert steps[0]["counts"] == steps[1]["counts"] and steps[0]["memory"] == steps[1]["memory"]
        union = Counter(steps[0]["local"]) + Counter(steps[1]["local"])
        assert [union[k] for k in steps[0]["keys"]] == steps[0]["counts"] and sum(steps[0]["counts"]) == 32
    assert any(len(set(runs[0]["steps"][t]["counts"])) > 1 for t in range(2, 4))
