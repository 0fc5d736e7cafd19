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
with each step's allocation, rows, rewards, advantages and memory; ``python trl_two_process.py OUT_DIR est-single``
runs the same on one process holding the same global batch (``OUT_DIR/est-single-rank0.json``).

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
    """1+1 and 2+2 always correct; the others when the completion's first character code is divisible by 4."""
    return [1.0 if p in ("1+1=", "2+2=") else float(bool(c) and ord(c[0]) % 4 == 0)
            for p, c in zip(prompts, completions)]


EST_PROMPTS = ["1+1=", "2+2=", "3+3=", "4+4=", "5+5=", "6+6=", "7+7=", "8+8="]
EST_STEPS = 8
EST_STEP_ROWS = 32  # the step's rows over every process: 4 prompts x num_generations 8


def train_est(out_dir: str, which: str) -> dict:
    """Reinforce-Ada-Est with the step's 4 prompts (of 8, TRL's shuffling: prompts recur and move between processes)
    on the processes this was launched with -- ``est`` on two, 16 rows each; ``est-single`` on one holding the same
    32-row global batch; ``est-server`` on two through TRL's vLLM server mode (its gather, one request for the step's
    rows, broadcast and slice; only the HTTP client faked), 4 steps. Records, per step: the step's prompts, counts and estimates, this process's rows' prompts,
    the gathered rewards, the advantages of every row and of this process's rows, and the memory after the step.

    Completions are a function of the prompt and of the row's rank among its prompt's rows in the step's global
    layout (the generation is replaced, the rest is TRL's), so one process and two see the same completions and
    rewards, and their counts, advantages and memory can be compared exactly (``est-server`` keeps TRL's generation:
    the fake client's random completions)."""
    import random

    import torch
    from accelerate import PartialState
    from datasets import Dataset

    from reinforce_ada.integrations.trl import AdaGRPOConfig, AdaGRPOTrainer
    from reinforce_ada.models import build_char_tokenizer, build_tiny_model
    from reinforce_ada.models.tiny import TINY_VOCAB
    from reinforce_ada.sampling.memory import prompt_key

    tokenizer = build_char_tokenizer()

    class Recording(AdaGRPOTrainer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.record = []

        def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, *args):
            if server:  # TRL's own server-mode path (gather, one request, broadcast, slice) with the client faked
                return super()._generate_single_turn(prompt_ids, images, multimodal_fields, num_generations, *args)
            step = self.ada_est.step
            first = {}  # the prompt's first row in the global layout
            for row, x in enumerate(step.index.tolist()):
                first.setdefault(x, row)
            rows = range(step.local_rows.start, step.local_rows.stop)
            completion_ids = []
            for row in rows:
                x = int(step.index[row])
                rng = random.Random(f"{step.prompts[x].prompt}|{row - first[x]}")
                length = rng.randint(1, 6)
                ids = [rng.randrange(3, len(TINY_VOCAB)) for _ in range(length)]
                completion_ids.append(ids + [tokenizer.eos_token_id] * (length < 6))
            return completion_ids, None

        def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
            rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
            if self.model.training:
                self._gathered = rewards[:, 0].tolist()
            return rewards

        def _est_generate_and_score(self, inputs):
            original = self.ada_est.assign_rows
            seen = {}

            def assign(batch, *args):
                rows = original(batch, *args)
                step = self.ada_est.step
                seen.update(keys=[prompt_key(p) for p in step.prompts], counts=step.counts.tolist(),
                            p_hat=step.p_hat.tolist(), local=[prompt_key(step.prompts[x])
                                                              for x in step.index[step.local_rows].tolist()],
                            rows=len(rows), local_start=step.local_rows.start)
                return rows

            self.ada_est.assign_rows = assign
            try:
                output = super()._est_generate_and_score(inputs)
            finally:
                del self.ada_est.assign_rows
            self.record.append({**seen, "rewards": self._gathered,
                                "advantages": self.ada_est.last_advantages.tolist(),
                                "local_advantages": output["advantages"].tolist(),
                                "memory": self.ada_est.memory.state_dict()})
            return output

    num_processes = int(os.environ.get("WORLD_SIZE", "1"))  # as the launcher set it (PartialState is not up yet)
    server = which == "est-server"
    clients = []
    if server:
        from trl.generation.vllm_generation import VLLMGeneration

        def fake_init_vllm(self):  # the HTTP client to `trl vllm-serve`, on the main process only, as in TRL
            self.vllm_client = None
            if self.accelerator.is_main_process:
                self.vllm_client = FakeVLLMClient(len(TINY_VOCAB), tokenizer.eos_token_id)
                clients.append(self.vllm_client)

        VLLMGeneration._init_vllm = fake_init_vllm
    dataset = Dataset.from_dict({"prompt": EST_PROMPTS, "answer": [str(2 * i) for i in range(1, 9)]})
    args = AdaGRPOConfig(
        output_dir=os.path.join(out_dir, which), use_cpu=True, report_to=[], bf16=False, save_strategy="no",
        mode="est", num_generations=8, per_device_train_batch_size=EST_STEP_ROWS // num_processes,
        scale_rewards="none", max_completion_length=MAX_COMPLETION_LENGTH, max_steps=4 if server else EST_STEPS,
        logging_steps=1, learning_rate=1e-2, seed=0, use_vllm=server, vllm_mode="server")
    torch.manual_seed(0)
    trainer = Recording(model=build_tiny_model(), reward_funcs=est_reward, args=args, train_dataset=dataset,
                        processing_class=tokenizer)
    trainer.train()
    return {"global_step": trainer.state.global_step, "num_processes": PartialState().num_processes,
            "steps": trainer.record, "client_calls": clients[0].generate_calls if clients else None,
            "logs": [h for h in trainer.state.log_history if "ada/est/alloc_max" in h]}


def main(out_dir: str, which: str = "rounds") -> None:
    if which.startswith("est"):
        results = {"est": train_est(out_dir, which)}
    else:
        results = {mode: train(out_dir, mode) for mode in ("plain", "server")}
    from accelerate import PartialState

    state = PartialState()
    with open(os.path.join(out_dir, f"{which}-rank{state.process_index}.json"), "w") as f:
        json.dump(results, f)
    # End the gloo group the launcher started before the interpreter exits: left to the exit, its threads can abort a
    # process that has finished its work ("terminate called without an active exception", SIGABRT; seen once in CI).
    state.wait_for_everyone()
    state.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:])
