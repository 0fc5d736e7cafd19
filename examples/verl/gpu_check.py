"""Two Reinforce-Ada training steps on verl with a tiny local model -- a smoke check for a machine with a GPU.

It builds everything locally (nothing is downloaded): the ~1M-parameter Qwen2 model and character tokenizer from
``reinforce_ada.models.tiny`` (saved with safetensors and a minimal chat template), a parquet file of arithmetic
prompts, and a reward function whose rewards are mixed (so prompts exit in different rounds). It then runs
``python -m reinforce_ada.integrations.verl.main_ppo`` for 2 steps on 1 GPU with vLLM, 8 prompts, n=4, M=4, N=2,
and checks the console log: both steps ran and the sampler's metrics (``timing_s/reinforce_ada/...``) were logged.

With ``--est`` it checks Reinforce-Ada-Est on verl's v1 trainer instead (``--config-name reinforce_ada_est_trainer``):
8 prompts seen twice (2 epochs of one step), ``rollout.n`` = ``est.samples_per_prompt`` = 4, a checkpoint after each
step; passed when both steps ran, Est's metrics file holds an allocation and an advantage event for each step (each
allocation spending ``4 x 8`` samples), and the last checkpoint holds Est's memory.

    python examples/verl/gpu_check.py                 # needs a CUDA GPU, verl 0.9.x and vLLM
    python examples/verl/gpu_check.py --est           # Est on the v1 trainer (also needs transferqueue)
    python examples/verl/gpu_check.py --dry-run       # anywhere: build the files, compose and validate the config
    MODEL_PATH=/models/Qwen2.5-0.5B-Instruct python examples/verl/gpu_check.py   # a real small model instead

Exit status: 0 when the check passed; 1 when it failed or could not run (no GPU, or no vLLM: printed as NOT RUN).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

logger = logging.getLogger("gpu_check")

NUM_PROMPTS, N, M, ROUNDS, STEPS = 8, 4, 4, 2, 2
PROMPT_LENGTH, RESPONSE_LENGTH = 32, 16

REWARD_SOURCE = '''"""Mixed rewards for the smoke check: 1 when the completion has an even number of characters."""


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    return float(len(solution_str) % 2 == 0)
'''

CHAT_TEMPLATE = ("{% for message in messages %}{{ message['content'] }}{% endfor %}"
                 "{% if add_generation_prompt %}={% endif %}")


def build_model(directory: Path) -> Path:
    """Save the tiny Qwen2 model (head_dim 64, which vLLM's attention kernels support) and its tokenizer."""
    from reinforce_ada.models.tiny import build_char_tokenizer, build_tiny_model

    model = build_tiny_model(hidden_size=256, num_layers=2, num_heads=4, max_positions=128)
    tokenizer = build_char_tokenizer()
    tokenizer.chat_template = CHAT_TEMPLATE
    model.save_pretrained(directory, safe_serialization=True)
    tokenizer.save_pretrained(directory)
    return directory


def build_data(directory: Path, num_train: int = 2 * NUM_PROMPTS) -> tuple[Path, Path]:
    """verl-format parquet files: a chat ``prompt``, ``data_source``, ``reward_model.ground_truth``."""
    import pandas as pd

    def rows(offset: int, count: int) -> list[dict]:
        return [{"data_source": "reinforce_ada/gpu_check",
                 "prompt": [{"role": "user", "content": f"{a}+{a + 1}"}],
                 "reward_model": {"style": "rule", "ground_truth": str(2 * a + 1)},
                 "extra_info": {"index": a}} for a in range(offset, offset + count)]

    train, val = directory / "train.parquet", directory / "val.parquet"
    pd.DataFrame(rows(0, num_train)).to_parquet(train)
    pd.DataFrame(rows(100, 4)).to_parquet(val)
    return train, val


def overrides(model_path: Path | str, train: Path, val: Path, reward: Path, output: Path, est: bool = False
              ) -> list[str]:
    if est:  # Est: N samples per prompt on average, a checkpoint (with Est's memory) after every step
        sampler = [f"algorithm.reinforce_ada.est.samples_per_prompt={N}", f"actor_rollout_ref.rollout.n={N}",
                   "trainer.save_freq=1"]
    else:
        sampler = [f"algorithm.reinforce_ada.samples_per_round={M}", f"algorithm.reinforce_ada.max_rounds={ROUNDS}",
                   f"actor_rollout_ref.rollout.n={N}", "trainer.save_freq=-1"]
    return sampler + [
        f"data.train_files=['{train}']",
        f"data.val_files=['{val}']",
        f"data.train_batch_size={NUM_PROMPTS}",
        f"data.max_prompt_length={PROMPT_LENGTH}",
        f"data.max_response_length={RESPONSE_LENGTH}",
        "data.dataloader_num_workers=0",
        f"actor_rollout_ref.model.path={model_path}",
        "actor_rollout_ref.model.use_remove_padding=false",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={NUM_PROMPTS}",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8",
        "actor_rollout_ref.actor.use_torch_compile=false",
        "actor_rollout_ref.actor.fsdp_config.use_torch_compile=false",
        "actor_rollout_ref.actor.optim.lr=1e-4",
        "actor_rollout_ref.actor.clip_ratio_low=0.2",
        "actor_rollout_ref.actor.clip_ratio_high=0.28",
        "actor_rollout_ref.actor.loss_agg_mode=token-mean",
        "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.3",
        "actor_rollout_ref.rollout.enforce_eager=true",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8",
        f"actor_rollout_ref.rollout.max_num_batched_tokens={4 * (PROMPT_LENGTH + RESPONSE_LENGTH) * NUM_PROMPTS}",
        "actor_rollout_ref.rollout.agent.num_workers=2",
        f"reward.custom_reward_function.path={reward}",
        "reward.custom_reward_function.name=compute_score",
        "reward.num_workers=2",
        "trainer.logger=['console']",
        "trainer.n_gpus_per_node=1",
        "trainer.nnodes=1",
        f"trainer.total_training_steps={STEPS}",
        "trainer.val_before_train=false",
        "trainer.test_freq=-1",
        f"trainer.default_local_dir={output / 'checkpoints'}",
        "ray_kwargs.ray_init.num_cpus=8",
    ]


def check_step_lines(log: str) -> list[str]:
    """The steps with no metrics line in a training log."""
    return [f"no metrics line for step {step}" for step in range(1, STEPS + 1) if not re.search(rf"step:{step}\b", log)]


def check_log(log: str) -> list[str]:
    """What is wrong with a training log (empty when both steps ran with the sampler's metrics)."""
    problems = check_step_lines(log)
    for metric in ("timing_s/reinforce_ada/total_samples", "timing_s/reinforce_ada/rounds_used",
                   "timing_s/reinforce_ada/pool/score/mean", "timing_s/reinforce_ada/kept/score/mean",
                   "timing_s/reinforce_ada/round_s/max", "timing_s/reinforce_ada/perf/gen_throughput"):
        if metric not in log:
            problems.append(f"{metric} was not logged")
    return problems


def check_est_run(output: Path) -> list[str]:
    """What is wrong with an Est run's own records (empty when each step allocated ``N x NUM_PROMPTS`` samples, was
    scored, and the last checkpoint holds the memory)."""
    problems = []
    metrics_path = output / "checkpoints" / "reinforce_ada_est_metrics.jsonl"
    events = ([json.loads(line) for line in metrics_path.read_text().splitlines() if line.strip()]
              if metrics_path.exists() else [])
    if not events:
        problems.append(f"no Est metrics in {metrics_path}")
    for step in range(1, STEPS + 1):
        allocations = [e for e in events if e["event"] == "allocate" and e["step"] == step]
        if not allocations:
            problems.append(f"no Est allocation for step {step}")
        elif any(e["reinforce_ada_est/alloc_total"] != N * NUM_PROMPTS for e in allocations):
            problems.append(f"step {step} did not allocate {N} x {NUM_PROMPTS} samples")
        if not any(e["event"] == "advantage" and e["step"] == step for e in events):
            problems.append(f"no Est advantage (memory update) for step {step}")
    memory = output / "checkpoints" / f"global_step_{STEPS}" / "reinforce_ada_est.json"
    if not memory.exists():
        problems.append(f"{memory} was not written")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dry-run", action="store_true",
                        help="build the files and check the config only (no GPU needed)")
    parser.add_argument("--workdir", type=Path, default=None, help="where to put the model, data and log")
    parser.add_argument("--timeout", type=int, default=1200, help="seconds before the training run is killed")
    parser.add_argument("--est", action="store_true",
                        help="check Reinforce-Ada-Est on verl's v1 trainer instead of Seq on the legacy trainer")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    if not args.dry_run:
        import importlib.util

        import torch

        if not torch.cuda.is_available():
            logger.error("NOT RUN: no CUDA GPU on this machine")
            return 1
        if importlib.util.find_spec("vllm") is None:
            logger.error("NOT RUN: vLLM is not installed (pip install vllm)")
            return 1

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="reinforce_ada_verl_check_"))
    workdir.mkdir(parents=True, exist_ok=True)
    model_path = os.environ.get("MODEL_PATH") or build_model(workdir / "model")
    train, val = build_data(workdir, num_train=NUM_PROMPTS if args.est else 2 * NUM_PROMPTS)
    reward = workdir / "reward.py"
    reward.write_text(REWARD_SOURCE)
    cli = overrides(model_path, train, val, reward, workdir, est=args.est)

    from reinforce_ada.integrations.verl.config import (CONFIG_NAME, EST_CONFIG_NAME, check_verl_config,
                                                        compose_trainer_config)

    config_name = EST_CONFIG_NAME if args.est else CONFIG_NAME
    config = compose_trainer_config(cli, config_name=config_name)
    sampler = check_verl_config(config)
    logger.info("config OK: sampler %s", json.dumps(sampler.to_dict()))
    if args.dry_run:
        from verl.trainer.ppo.utils import need_critic, need_reference_policy
        from verl.utils.config import validate_config

        validate_config(config=config, use_reference_policy=need_reference_policy(config),
                        use_critic=need_critic(config))
        logger.info("DRY RUN OK: files in %s", workdir)
        return 0

    command = [sys.executable, "-m", "reinforce_ada.integrations.verl.main_ppo", "--config-name", config_name, *cli]
    logger.info("running: %s", " ".join(command))
    log_path = workdir / "train.log"
    with open(log_path, "w") as log_file:
        try:
            result = subprocess.run(command, stdout=log_file, stderr=subprocess.STDOUT, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            logger.error("FAILED: training did not finish in %d s; log: %s", args.timeout, log_path)
            return 1
    log = log_path.read_text(errors="replace")
    problems = ([f"exit status {result.returncode}"] if result.returncode else []) + (
        check_step_lines(log) + check_est_run(workdir) if args.est else check_log(log))
    if problems:
        logger.error("FAILED: %s\n--- last lines of %s ---\n%s", "; ".join(problems), log_path,
                     "\n".join(log.splitlines()[-60:]))
        return 1
    for line in log.splitlines():
        if re.search(r"step:\d", line):
            logger.info("%s", " ".join(part for part in line.split(" - ")
                                       if "reinforce_ada" in part or part.startswith("step")))
    if args.est:
        logger.info("Est: %s", (workdir / "checkpoints" / "reinforce_ada_est_metrics.jsonl").read_text())
    logger.info("PASSED: %d steps of Reinforce-Ada%s on verl; log: %s", STEPS, "-Est (v1 trainer)" if args.est else "",
                log_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
