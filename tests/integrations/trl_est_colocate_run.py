"""Run by tests/integrations/test_trl_est_vllm.py in a process of its own (TRL's colocate mode initialises
torch.distributed for vLLM's external launcher, which would outlive the test in pytest's process): ``AdaGRPOTrainer``
with ``mode="est"``, ``use_vllm=True, vllm_mode="colocate"`` on the real CPU engine, a 2-head tiny model (head size 32)
saved to a folder, 4 steps of 16 rows over 4 prompts that recur every other step, each step one easy prompt (every
completion correct) and one hard one (about a quarter correct).

Writes to ``argv[1]``, per training generation: Est's prompts, counts and estimates, the engine's generate calls
(the real ``vllm.LLM.generate``, only counted), and what TRL's loss saw (each row's prompt and completion text,
advantage, the importance-sampling ratio TRL applies -- per sequence under TRL's default ``sequence_mask`` -- and
``|trainer log-prob - engine log-prob|`` per completion token); plus TRL's log history, whether the
valid reload synced the engine and whether the weights moved."""

import json
import sys
from pathlib import Path

PROMPTS = ["1+1=", "3+3=", "2+2=", "4+4="]  # easy, hard, easy, hard: each step of 2 prompts has one of each
EASY = ("1+1=", "2+2=")


def est_reward(prompts, completions, **columns):
    """Easy prompts: every completion correct; hard ones: correct when the completion's first character code is
    divisible by 4 (about a quarter of the time)."""
    return [1.0 if p in EASY else float(bool(c) and ord(c[0]) % 4 == 0) for p, c in zip(prompts, completions)]


def main(out: Path) -> None:
    import torch
    from datasets import Dataset

    from reinforce_ada.integrations.trl import AdaGRPOConfig, AdaGRPOTrainer
    from reinforce_ada.models.tiny import build_char_tokenizer, build_tiny_model

    class Recording(AdaGRPOTrainer):
        """Records each training generation's allocation and what the loss sees."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.steps: list[dict] = []
            assign, llm = self.ada_est.assign_rows, self.vllm_generation.llm
            generate = llm.generate

            def recording_assign(inputs, *rest):
                rows = assign(inputs, *rest)
                step = self.ada_est.step
                self.steps.append({"prompts": [p.prompt for p in step.prompts], "counts": step.counts.tolist(),
                                   "p_hat": step.p_hat.tolist(), "generate_calls": [], "loss": []})
                return rows

            def counting_generate(prompts, *rest, **kwargs):
                if self.model.training and self.steps:
                    self.steps[-1]["generate_calls"].append(len(prompts))
                return generate(prompts, *rest, **kwargs)

            self.ada_est.assign_rows = recording_assign
            llm.generate = counting_generate

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            if model.training:
                decode = self.processing_class.batch_decode
                mask = inputs["completion_mask"].bool()
                ratio = inputs["importance_sampling_ratio"]  # (B, 1) per sequence (TRL's default), (B, T) per token
                diff = (inputs["old_per_token_logps"] - inputs["sampling_per_token_logps"]).abs()  # (B, T)
                self.steps[-1]["loss"].append({
                    "prompts": decode(inputs["prompt_ids"], skip_special_tokens=True),
                    "completions": decode(inputs["completion_ids"] * mask, skip_special_tokens=True),
                    "advantages": inputs["advantages"].tolist(),
                    "ratios": [(r if len(r) == 1 else r[m]).tolist() for r, m in zip(ratio, mask)],
                    "logp_differences": [d[m].tolist() for d, m in zip(diff, mask)]})
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)

    folder = out.parent / "model"
    build_tiny_model(num_heads=2, seed=0).save_pretrained(folder)
    build_char_tokenizer().save_pretrained(folder)
    args = AdaGRPOConfig(output_dir=str(out.parent / "run"), use_cpu=True, report_to=[], bf16=False,
                         save_strategy="no", mode="est", num_generations=8, per_device_train_batch_size=16,
                         scale_rewards="none", max_completion_length=6, max_steps=4, logging_steps=1,
                         learning_rate=1e-2, seed=0, shuffle_dataset=False, use_vllm=True, vllm_mode="colocate",
                         vllm_gpu_memory_utilization=0.1)
    dataset = Dataset.from_dict({"prompt": PROMPTS, "answer": ["2", "6", "4", "8"]})
    trainer = Recording(model=str(folder), reward_funcs=est_reward, args=args, train_dataset=dataset,
                        processing_class=build_char_tokenizer())
    before = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
    trainer.train()
    moved = any(not torch.equal(before[k], v) for k, v in trainer.model.named_parameters())
    out.write_text(json.dumps({"reload": trainer.ada_vllm_reload, "moved": moved, "steps": trainer.steps,
                               "log_history": trainer.state.log_history}))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
