"""Reinforce-Ada with TRL: Qwen2.5-Math-1.5B on math problems, generation on a vLLM server.

The paper's setup (arXiv 2510.04996): final group size n = 4 (TRL's ``num_generations``), M = 8 samples per round,
at most N = 4 rounds, the *balanced* exit rule and balanced downsampling, whole-pool baseline ``A = r - mean(pool)``
(no std normalisation: ``scale_rewards="none"``), token-level PPO-clip with clip range 0.2 / 0.28 (``epsilon`` / ``epsilon_high``,
``loss_type="dapo"`` = token mean) and dual-clip (``delta=3``), no KL term. Everything else is TRL's
``GRPOTrainer``: the diff from a plain TRL GRPO script is the import and the three sampling fields
(``samples_per_round``, ``max_rounds``, ``exit_rule``).

Launch (8 GPUs; GPU 0 serves vLLM, GPUs 1-7 train; see docs/trl.md for other layouts)::

    CUDA_VISIBLE_DEVICES=0 VLLM_SERVER_DEV_MODE=1 vllm serve Qwen/Qwen2.5-Math-1.5B \\
        --weight-transfer-config '{"backend": "nccl"}' --logprobs-mode processed_logprobs --max-logprobs -1 &
    CUDA_VISIBLE_DEVICES=1,2,3,4,5,6,7 accelerate launch --multi_gpu --num_processes 7 --mixed_precision bf16 \\
        examples/trl_qwen_math.py --output_dir runs/qwen-math-ada

``--est`` runs Reinforce-Ada-Est instead (arXiv 2510.04996v3, Alg. 1; ``mode="est"``): GRPO-n8's budget, 8 rows per
prompt handed out among each step's prompts by a per-prompt pass-rate memory (``n`` proportional to
``1 / sqrt(p_hat)``, clipped to [2, 32]), every row trained on with ``A = (r - rbar) / sqrt(rbar + 1e-6)``; the rest
of the setup as above. ``--memory_seed FILE`` seeds the memory from a ``reinforce-ada select-prompts`` pass-rate
file.

Every ``AdaGRPOConfig`` / ``GRPOConfig`` field is a command-line flag (``--learning_rate 1e-6``,
``--vllm_mode colocate``, ``--exit_rule positive``, ...). ``--smoke_test`` runs two steps of the same script on the
CPU with a tiny local model and a few inline problems (no download, no vLLM) -- a check that the wiring works.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)

INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."

PAPER_DEFAULTS: dict[str, Any] = dict(
    # Reinforce-Ada sampling (the paper's Reinforce-Ada-balance).
    num_generations=4, samples_per_round=8, max_rounds=4, exit_rule="balanced", selection="balanced",
    advantage="pool", scale_rewards="none",
    # Loss: token-level PPO-clip, asymmetric clip, dual-clip (TRL's `delta` caps the ratio, which for negative
    # advantages is dual-clip with c = 3, verl's default clip_ratio_c), no KL.
    loss_type="dapo", epsilon=0.2, epsilon_high=0.28, delta=3.0, beta=0.0,
    # Generation on a vLLM server (started separately, see the module docstring).
    use_vllm=True, vllm_mode="server", temperature=1.0, max_completion_length=3072,
    # Optimisation (our choices, not the paper's; override on the command line). 16 rows per process = 4 prompts.
    learning_rate=1e-6, per_device_train_batch_size=16, gradient_accumulation_steps=4, num_train_epochs=1,
    bf16=True, gradient_checkpointing=True, logging_steps=1, save_strategy="steps", save_steps=100,
    report_to=["tensorboard"],
)

EST_DEFAULTS: dict[str, Any] = dict(
    # Reinforce-Ada-Est at GRPO-n8's budget: num_generations is the budget per prompt (est_samples_per_prompt); the
    # round-based fields are not used. 16 rows per process = 2 prompts' budget, however Est hands them out.
    mode="est", num_generations=8, est_samples_per_prompt=8, scale_rewards="none",
)

SMOKE_TEST_OVERRIDES: dict[str, Any] = dict(
    use_vllm=False, use_cpu=True, bf16=False, gradient_checkpointing=False, max_completion_length=8,
    num_generations=2, samples_per_round=2, max_rounds=2, per_device_train_batch_size=4,
    gradient_accumulation_steps=1, max_steps=2, learning_rate=1e-3, report_to=[], save_strategy="no",
)


@dataclass
class ScriptArguments:
    model_name_or_path: str = field(default="Qwen/Qwen2.5-Math-1.5B", metadata={"help": "Policy to train."})
    dataset_name: str = field(default="DigitalLearningGmbH/MATH-lighteval",
                              metadata={"help": "Hub dataset (or local path) with a problem and a reference column."})
    dataset_config: str | None = field(default=None, metadata={"help": "Dataset configuration name."})
    dataset_split: str = field(default="train", metadata={"help": "Split to train on."})
    problem_column: str = field(default="problem", metadata={"help": "Column holding the problem text."})
    solution_column: str = field(default="solution",
                                 metadata={"help": "Column holding the reference (a \\boxed{} answer or the answer)."})
    smoke_test: bool = field(default=False,
                             metadata={"help": "Two CPU steps with a tiny local model and inline problems."})
    est: bool = field(default=False, metadata={"help": "Reinforce-Ada-Est (mode='est', 8 rows per prompt handed out "
                                                       "by the pass-rate memory) instead of the rounds."})


def boxed_accuracy(completions: list, solution: list[str], **kwargs: Any) -> list[float | None]:
    """1.0 when the completion's final (boxed) answer is equivalent to the reference's, else 0.0 (math-verify).

    Works for plain-text and chat completions. ``None`` (skipped by TRL and by the sampler's failure handling)
    when the reference cannot be parsed.
    """
    from math_verify import parse, verify  # the [math] extra

    rewards: list[float | None] = []
    for completion, reference in zip(completions, solution):
        text = completion if isinstance(completion, str) else completion[-1]["content"]
        gold = parse(reference)
        if not gold:
            rewards.append(None)
            continue
        rewards.append(float(verify(gold, parse(text))))
    return rewards


def load_train_dataset(script_args: ScriptArguments, chat: bool):
    from datasets import Dataset, load_dataset

    if script_args.smoke_test:
        problems = [f"{a}+{b}=" for a, b in [(1, 1), (2, 3), (4, 4), (5, 2), (3, 3), (6, 1), (2, 2), (7, 0)]]
        return Dataset.from_dict({"prompt": problems, "solution": [f"${smoke_answer(p)}$" for p in problems]})

    dataset = load_dataset(script_args.dataset_name, script_args.dataset_config, split=script_args.dataset_split)

    def to_prompt(example: dict) -> dict:
        content = f"{example[script_args.problem_column]}\n{INSTRUCTION}"
        prompt = [{"role": "user", "content": content}] if chat else content
        return {"prompt": prompt, "solution": example[script_args.solution_column]}

    return dataset.map(to_prompt, remove_columns=dataset.column_names)


def smoke_answer(problem: str) -> int:
    """The answer to an inline smoke-test problem ``"a+b="`` (parsed, never evaluated as code)."""
    left, right = problem.rstrip("=").split("+")
    return int(left) + int(right)


def parse_args(argv: list[str] | None = None):
    """(ScriptArguments, AdaGRPOConfig) from the command line, on top of the paper's defaults."""
    from transformers import HfArgumentParser

    from reinforce_ada.integrations.trl import AdaGRPOConfig

    parser = HfArgumentParser((ScriptArguments, AdaGRPOConfig))
    parser.set_defaults(output_dir="runs/trl-qwen-math-ada", **PAPER_DEFAULTS)
    pre_args, _ = parser.parse_known_args(argv)
    if pre_args.est:  # the round-based fields back at their defaults: Est does not use them
        rounds = {name: AdaGRPOConfig.__dataclass_fields__[name].default
                  for name in ("samples_per_round", "max_rounds", "exit_rule", "selection", "advantage")}
        parser.set_defaults(**rounds, **EST_DEFAULTS)
    if pre_args.smoke_test:
        parser.set_defaults(**SMOKE_TEST_OVERRIDES)
        if pre_args.est:
            parser.set_defaults(samples_per_round=8, max_rounds=4, num_generations=8, per_device_train_batch_size=16)
    return parser.parse_args_into_dataclasses(args=argv)


def main(argv: list[str] | None = None) -> Any:
    from reinforce_ada.integrations.trl import AdaGRPOTrainer

    script_args, training_args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    if script_args.smoke_test:
        from reinforce_ada.models import build_char_tokenizer, build_tiny_model

        model, tokenizer = build_tiny_model(), build_char_tokenizer()
    else:
        model, tokenizer = script_args.model_name_or_path, None  # TRL loads both (bf16 with --bf16)
    chat = not script_args.smoke_test
    train_dataset = load_train_dataset(script_args, chat=chat)

    trainer = AdaGRPOTrainer(model=model, reward_funcs=boxed_accuracy, args=training_args,
                             train_dataset=train_dataset, processing_class=tokenizer)
    trainer.train()
    if not script_args.smoke_test:
        trainer.save_model(training_args.output_dir)
    return trainer


if __name__ == "__main__":
    main()
