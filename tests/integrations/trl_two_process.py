"""Two-process run of AdaGRPOTrainer for tests/integrations/test_trl_distributed.py.

Launched as ``accelerate launch --cpu --num_processes 2 tests/integrations/trl_two_process.py OUT_DIR``. The dataset
is ordered so that one process holds only "easy" prompts (their scripted rewards alternate 1, 0, 1, ... so they exit
after the first round) and the other only "hard" prompts (reward always 0, so they use all ``max_rounds`` rounds).
Each process writes ``OUT_DIR/rank{i}.json`` with, per training step, its own number of sampling rounds and the
number of generation rounds it took part in (which must be the same on every process).
"""

import json
import os
import sys
from collections import Counter

MAX_ROUNDS = 4


def scripted_reward(prompts, completions, **kwargs):
    """Easy prompts ("E..."): 1, 0, 1, 0, ... by occurrence within the call; hard prompts ("H..."): always 0."""
    seen = Counter()
    rewards = []
    for prompt in prompts:
        rewards.append(float(prompt.startswith("E") and seen[prompt] % 2 == 0))
        seen[prompt] += 1
    return rewards


def main(out_dir: str) -> None:
    # Imported here so that pytest's doctest collection can import this file cheaply (and without TRL).
    import torch
    from datasets import Dataset

    from reinforce_ada.integrations.trl import AdaGRPOConfig, AdaGRPOTrainer
    from reinforce_ada.models import build_char_tokenizer, build_tiny_model

    model, tokenizer = build_tiny_model(), build_char_tokenizer()
    # 2 prompts per process per step; the first local batch is easy, the second hard (no shuffling).
    dataset = Dataset.from_dict({"prompt": ["E1+1=", "E2+2=", "H3+3=", "H4+4=", "E5+5=", "E6+6=", "H7+7=", "H8+8="]})
    args = AdaGRPOConfig(
        output_dir=os.path.join(out_dir, "run"), use_cpu=True, report_to=[], bf16=False, save_strategy="no",
        per_device_train_batch_size=4, num_generations=2, samples_per_round=2, max_rounds=MAX_ROUNDS,
        exit_rule="balanced", max_completion_length=6, max_steps=2, logging_steps=1, learning_rate=1e-2,
        shuffle_dataset=False, seed=0,
    )
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    trainer = AdaGRPOTrainer(model=model, reward_funcs=scripted_reward, args=args, train_dataset=dataset,
                             processing_class=tokenizer)
    trainer.train()
    after = dict(trainer.accelerator.unwrap_model(trainer.model).named_parameters())
    changed = any(not torch.equal(before[k], after[k].detach().cpu()) for k in before)
    rank = trainer.accelerator.process_index
    result = {
        "rank": rank,
        "num_processes": trainer.accelerator.num_processes,
        "backend": torch.distributed.get_backend() if torch.distributed.is_initialized() else None,
        "global_step": trainer.state.global_step,
        "history": trainer.ada_history,
        "prompts_last_step": [g.prompt.prompt for g in trainer.ada_last_batch.groups],
        "params_changed": changed,
        "logged_rounds": [h["ada/rounds"] for h in trainer.state.log_history if "ada/rounds" in h],
    }
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(sys.argv[1])
