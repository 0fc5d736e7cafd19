"""Two-process runs of AdaGRPOTrainer for tests/integrations/test_trl_distributed.py.

Launched as ``accelerate launch --multi_gpu --num_processes 2 tests/integrations/trl_two_process.py OUT_DIR`` (CPU,
gloo). The dataset is ordered so that one process holds only "easy" prompts (their scripted rewards alternate
1, 0, 1, ... so they exit after the first round) and the other only "hard" prompts (reward always 0, so they use all
``max_rounds`` rounds). Two runs, one after the other:

* ``plain``  -- TRL's transformers generation.
* ``server`` -- TRL's vLLM *server* mode: TRL's own ``VLLMGeneration`` (gather to the main process, one request,
  broadcast, slice per process) and weight sync, with only the HTTP client replaced by :class:`FakeVLLMClient`, which
  exists on the main process alone (another process touching it would fail).

A third, ``est`` (``... OUT_DIR est``): Reinforce-Ada-Est on the two processes, writing ``OUT_DIR/est-rank{i}.json``
with each step's keys, counts, estimates and memory.

Each process writes ``OUT_DIR/rounds-rank{i}.json`` with, per run and training step, its own number of sampling rounds and
the number of generation rounds it took part in (which must be equal on every process).
"""

import json
import os
import random
import sys
from collections import Counter

MAX_ROUNDS = 4
MAX_COMPLETION_LENGTH = 6


def scripted_reward(prompts, completions, **kwargs):
    """Easy prompts ("E..."): 1, 0, 1, 0, ... by occurrence within the call; hard prompts ("H..."): always 0."""
    seen = Counter()
    rewards = []
    for prompt in prompts:
        rewards.append(float(prompt.startswith("E") and seen[prompt] % 2 == 0))
        seen[prompt] += 1
    return rewards


class FakeVLLMClient:
    """Stands in for ``trl``'s ``VLLMClient`` (HTTP to ``trl vllm-serve``): random token completions, logprob -1."""

    def __init__(self, vocab_size: int, eos_token_id: int):
        self.vocab_size, self.eos_token_id = vocab_size, eos_token_id
        self.rng = random.Random(0)
        self.generate_calls: list[dict] = []
        self.num_weight_syncs = 0

    def get_server_info(self):
        return {"model_config": {"logprobs_mode": "processed_logprobs"}}

    def update_named_params(self, metadata, named_params):
        for _ in named_params:  # consume, as the real client streams them
            pass
        self.num_weight_syncs += 1

    def reset_prefix_cache(self):
        pass

    def generate(self, prompts, features=None, n=1, max_tokens=16, **sampling):
        self.generate_calls.append({"num_prompts": len(prompts), "n": n})
        completion_ids = []
        for _ in prompts:
            for _ in range(n):
                length = self.rng.randint(1, max_tokens)
                ids = [self.rng.randrange(3, self.vocab_size) for _ in range(length)]
                if length < max_tokens:
                    ids[-1] = self.eos_token_id
                completion_ids.append(ids)
        logprobs = [[[-1.0] for _ in ids] for ids in completion_ids]
        token_ids = [[[t] for t in ids] for ids in completion_ids]
        return {"prompt_ids": prompts, "completion_ids": completion_ids, "logprobs": logprobs,
                "logprob_token_ids": token_ids}


def train(out_dir: str, mode: str) -> dict:
    # Imported here so that pytest's doctest collection can import this file cheaply (and without TRL).
    import torch
    from datasets import Dataset
    from trl.generation.vllm_generation import VLLMGeneration

    from reinforce_ada.integrations.trl import AdaGRPOConfig, AdaGRPOTrainer
    from reinforce_ada.models import build_char_tokenizer, build_tiny_model
    from reinforce_ada.models.tiny import TINY_VOCAB

    model, tokenizer = build_tiny_model(), build_char_tokenizer()
    # 2 prompts per process per step; the first local batch is easy, the second hard (no shuffling).
    dataset = Dataset.from_dict({"prompt": ["E1+1=", "E2+2=", "H3+3=", "H4+4=", "E5+5=", "E6+6=", "H7+7=", "H8+8="]})
    args = AdaGRPOConfig(
        output_dir=os.path.join(out_dir, mode), use_cpu=True, report_to=[], bf16=False, save_strategy="no",
        per_device_train_batch_size=4, num_generations=2, samples_per_round=2, max_rounds=MAX_ROUNDS,
        exit_rule="balanced", max_completion_length=MAX_COMPLETION_LENGTH, max_steps=2, logging_steps=1,
        learning_rate=1e-2, shuffle_dataset=False, seed=0, use_vllm=(mode == "server"), vllm_mode="server",
    )
    clients = []

    def fake_init_vllm(self):  # replaces the HTTP connection to `trl vllm-serve`; main process only, as in TRL
        self.vllm_client = None
        if self.accelerator.is_main_process:
            self.vllm_client = FakeVLLMClient(len(TINY_VOCAB), tokenizer.eos_token_id)
            clients.append(self.vllm_client)

    VLLMGeneration._init_vllm = fake_init_vllm
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    trainer = AdaGRPOTrainer(model=model, reward_funcs=scripted_reward, args=args, train_dataset=dataset,
                             processing_class=tokenizer)
    trainer.train()
    after = dict(trainer.accelerator.unwrap_model(trainer.model).named_parameters())
    return {
        "num_processes": trainer.accelerator.num_processes,
        "backend": torch.distributed.get_backend() if torch.distributed.is_initialized() else None,
        "global_step": trainer.state.global_step,
        "history": trainer.ada_history,
        "params_changed": any(not torch.equal(before[k], after[k].detach().cpu()) for k in before),
        "logged_rounds": [h["ada/rounds"] for h in trainer.state.log_history if "ada/rounds" in h],
        "client_calls": clients[0].generate_calls if clients else None,
        "weight_syncs": clients[0].num_weight_syncs if clients else None,
    }


def est_reward(prompts, completions, **kwargs):
    """1+1 and 2+2 always correct; 3+3 and 4+4 when the completion's first character code is divisible by 4."""
    return [1.0 if p in ("1+1=", "2+2=") else float(bool(c) and ord(c[0]) % 4 == 0)
            for p, c in zip(prompts, completions)]


def train_est(out_dir: str) -> dict:
    """Reinforce-Ada-Est on two processes: 4 prompts, 2 per process per step (the whole set every step, reshuffled
    every step, so prompts move between processes); what each process allocated and remembered, step by step."""
    from datasets import Dataset

    from reinforce_ada.integrations.trl import AdaGRPOConfig, AdaGRPOTrainer
    from reinforce_ada.models import build_char_tokenizer, build_tiny_model
    from reinforce_ada.sampling.memory import prompt_key

    class Recording(AdaGRPOTrainer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.record = []

        def _est_generate_and_score(self, inputs):
            original = self.ada_est.assign_rows
            seen = {}

            def assign(batch):
                rows = original(batch)
                step = self.ada_est.step
                seen.update(keys=[prompt_key(p) for p in step.prompts], counts=step.counts.tolist(),
                            p_hat=step.p_hat.tolist(), rows=len(rows))
                return rows

            self.ada_est.assign_rows = assign
            try:
                output = super()._est_generate_and_score(inputs)
            finally:
                del self.ada_est.assign_rows
            self.record.append({**seen, "memory": self.ada_est.memory.state_dict(),
                                "loss_rows": int(output["advantages"].numel())})
            return output

    dataset = Dataset.from_dict({"prompt": ["1+1=", "2+2=", "3+3=", "4+4="], "answer": ["2", "4", "6", "8"]})
    args = AdaGRPOConfig(
        output_dir=os.path.join(out_dir, "est"), use_cpu=True, report_to=[], bf16=False, save_strategy="no",
        mode="est", num_generations=8, per_device_train_batch_size=16, scale_rewards="none",
        max_completion_length=MAX_COMPLETION_LENGTH, max_steps=6, logging_steps=1, learning_rate=1e-2, seed=0)
    trainer = Recording(model=build_tiny_model(), reward_funcs=est_reward, args=args, train_dataset=dataset,
                        processing_class=build_char_tokenizer())
    trainer.train()
    return {"global_step": trainer.state.global_step, "steps": trainer.record}


def main(out_dir: str, which: str = "rounds") -> None:
    if which == "est":
        results = {"est": train_est(out_dir)}
    else:
        results = {mode: train(out_dir, mode) for mode in ("plain", "server")}
    from accelerate import PartialState

    with open(os.path.join(out_dir, f"{which}-rank{PartialState().process_index}.json"), "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main(*sys.argv[1:])
