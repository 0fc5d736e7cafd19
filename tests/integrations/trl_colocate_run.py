"""Run by tests/integrations/test_trl_vllm_colocate.py in a process of its own (TRL's colocate mode initialises
torch.distributed for vLLM's external launcher, which would outlive the test in pytest's process): ``AdaGRPOTrainer``
with ``use_vllm=True, vllm_mode="colocate"`` on the CPU engine, a 2-head tiny model (head size 32) saved to a folder,
3 steps; writes TRL's log history, whether the valid reload was used and whether the weights moved to ``argv[1]``."""

import json
import sys
from pathlib import Path


def parity(prompts, completions, completion_ids, **columns):
    """Mixed rewards in every group: the parity of the first sampled token."""
    return [1.0 if ids and ids[0] % 2 else 0.0 for ids in completion_ids]


def main(out: Path) -> None:
    import torch
    from datasets import Dataset

    from reinforce_ada.integrations.trl import AdaGRPOConfig, AdaGRPOTrainer
    from reinforce_ada.models.tiny import build_char_tokenizer, build_tiny_model

    folder = out.parent / "model"
    build_tiny_model(num_heads=2, seed=0).save_pretrained(folder)
    build_char_tokenizer().save_pretrained(folder)
    args = AdaGRPOConfig(output_dir=str(out.parent / "run"), use_cpu=True, report_to=[], bf16=False,
                         save_strategy="no", per_device_train_batch_size=8, num_generations=4, samples_per_round=4,
                         max_rounds=2, max_completion_length=6, max_steps=3, logging_steps=1, learning_rate=1e-2,
                         seed=0, use_vllm=True, vllm_mode="colocate", vllm_gpu_memory_utilization=0.1)
    dataset = Dataset.from_dict({"prompt": [f"{i}+{i % 7}=" for i in range(16)]})
    trainer = AdaGRPOTrainer(model=str(folder), reward_funcs=parity, args=args, train_dataset=dataset,
                             processing_class=build_char_tokenizer())
    before = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
    trainer.train()
    moved = any(not torch.equal(before[k], v) for k, v in trainer.model.named_parameters())
    out.write_text(json.dumps({"reload": trainer.ada_vllm_reload, "moved": moved,
                               "log_history": trainer.state.log_history}))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
