"""The standalone trainer: Reinforce-Ada (or GRPO / DAPO) with a token-level PPO-clip loss, in one process.

Each step:
  1. draw ``batch_size`` prompts (a seeded, epoch-shuffled stream; ``ada-budget`` with ``budget_overdraw``: that
     many times more candidates, of which the budget trains on ``batch_size``);
  2. sample them with the core sampler (rounds, exits, selection, whole-pool advantages);
  3. rebuild ``prompt + completion`` token sequences and compute the old policy's log-probabilities;
  4. ``ppo_epochs`` passes of mini-batches of :func:`reinforce_ada.core.losses.ppo_clip_loss`, AdamW with
     warm-up and gradient clipping.
The step's metrics go to ``metrics.jsonl`` (and tensorboard / wandb when asked); checkpoints hold everything needed
to continue bit-for-bit on CPU (weights as safetensors, optimizer, scheduler, RNG, sampler and data-stream state).
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import shutil
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from reinforce_ada.config import ConfigError, DynamicSamplingConfig, TrainConfig
from reinforce_ada.generation.prompting import encode_prompt
from reinforce_ada.guards import (RunStopped, check_finite, check_prompt_lengths, check_verifier_failures,
                                  scored_accuracy, verifier_options, watch_verifier)
from reinforce_ada.run_folder import (check_run_folder, checkpoints, load_checkpoint_file, prepare_run_folder,
                                      read_trainer_state, record_event, truncate_metrics, write_atomic)
from reinforce_ada.preflight import NoDeviceError, check_train_inputs
from reinforce_ada.verifiers.registry import verifier_stats
from reinforce_ada.types import Completion, Prompt, SampledBatch

logger = logging.getLogger(__name__)


class PromptStream:
    """Prompts in a seeded random order, reshuffled every epoch; its position is part of the checkpoint."""

    def __init__(self, prompts: Sequence[Prompt], seed: int):
        if not prompts:
            raise ValueError("the training prompt set is empty")
        self.prompts = list(prompts)
        if len({p.prompt_id for p in self.prompts}) != len(self.prompts):
            raise ValueError("training prompts must have unique prompt_id values (a batch never repeats a prompt)")
        self.seed = seed
        self.epoch = 0
        self.position = 0
        self._order = self._shuffle()

    def _shuffle(self) -> list[int]:
        order = list(range(len(self.prompts)))
        random.Random(self.seed * 1_000_003 + self.epoch).shuffle(order)
        return order

    def __iter__(self):
        return self

    def __next__(self) -> Prompt:
        if self.position == len(self._order):
            self.epoch += 1
            self.position = 0
            self._order = self._shuffle()
        prompt = self.prompts[self._order[self.position]]
        self.position += 1
        return prompt

    def take(self, num: int) -> list[Prompt]:
        """``num`` prompts with distinct ids (a batch never holds the same prompt twice)."""
        batch, ids = [], set()
        for _ in range(min(num, len(self.prompts))):
            prompt = next(self)
            if prompt.prompt_id in ids:  # wrapped into a new epoch mid-batch
                prompt = next(p for p in self if p.prompt_id not in ids)
            ids.add(prompt.prompt_id)
            batch.append(prompt)
        return batch

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch, self.position = int(state["epoch"]), int(state["position"])
        self._order = self._shuffle()


class MetricsWriter:
    """metrics.jsonl always; tensorboard or wandb on request."""

    def __init__(self, folder: Path, report_to: str, config: dict[str, Any], resume_step: int | None = None):
        self.path = folder / "metrics.jsonl"
        if resume_step is not None:  # drop lines written after the checkpoint (atomically)
            truncate_metrics(self.path, resume_step)
        elif self.path.exists():
            self.path.unlink()
        self._tb = self._wandb = None
        if report_to == "tensorboard":
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(str(folder / "tensorboard"))
        elif report_to == "wandb":
            import wandb

            self._wandb = wandb.init(project="reinforce-ada", config=config, dir=str(folder))

    def write(self, record: dict[str, Any]) -> None:
        # Non-finite numbers (e.g. samples per signal-prompt with no signal) are written as null: strict JSON.
        record = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in record.items()}
        try:
            with self.path.open("a") as fh:
                fh.write(json.dumps(record) + "\n")
        except OSError as err:
            raise OSError(err.errno, f"could not write {self.path}: {err.strerror or err}") from err
        numeric = {k: v for k, v in record.items() if isinstance(v, (int, float))}
        if self._tb is not None:
            for key, value in numeric.items():
                self._tb.add_scalar(key, value, record["step"])
        if self._wandb is not None:
            self._wandb.log(numeric, step=record["step"])

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()


def _resolve_device(device: str) -> Any:
    import torch

    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise NoDeviceError(f"device={device!r} but torch sees no CUDA GPU")
    return torch.device(device)


def _check_report_to(report_to: str) -> None:
    """Fail before any model loads when the requested metrics sink is not installed."""
    import importlib.util

    if report_to != "none" and importlib.util.find_spec(report_to) is None:
        raise ImportError(f"report_to={report_to!r} needs the {report_to} package: pip install {report_to}")


def make_sampler(config: TrainConfig, generator: Any, verifier: Any):
    from reinforce_ada.sampler import AdaptiveSampler, DynamicSampler

    sampler_config = config.sampler_config()
    if config.sampler == "streaming":
        from reinforce_ada.streaming import build_sampler

        return build_sampler("streaming", generator, verifier, sampler_config,
                             allocation=config.streaming_allocation, target=config.streaming_target,
                             give_up_below=config.give_up_below, min_signal_rate=config.min_signal_rate,
                             budget=config.sample_budget, max_in_flight=config.max_in_flight,
                             memory=config.memory, memory_half_life=config.memory_half_life,
                             memory_max_evidence=config.memory_max_evidence,
                             memory_seed=config.memory_seed, skip_below=config.skip_below,
                             cap_below=config.cap_below)
    if isinstance(sampler_config, DynamicSamplingConfig):
        return DynamicSampler(generator, verifier, sampler_config)
    if sampler_config.is_budget:  # budget mode: priors from the cross-step pass-rate memory (checkpointed)
        from reinforce_ada.memory import PassRateMemory

        memory = PassRateMemory(half_life=None, max_evidence=config.memory_max_evidence)  # decays per visit
        if config.memory_seed:
            memory.seed_from_file(config.memory_seed)
        return AdaptiveSampler(generator, verifier, sampler_config, memory=memory)
    return AdaptiveSampler(generator, verifier, sampler_config)


def _task_options(config: TrainConfig) -> dict[str, Any]:
    """The config fields a built-in task takes: digits for ``arithmetic``; the system prompt and template for
    ``reasoning-gym:*`` (``""`` means no system prompt)."""
    if config.task == "arithmetic":
        return {"digits": config.task_digits}
    if str(config.task).startswith("reasoning-gym:"):
        return {"system_prompt": config.system_prompt or None, "template": config.template}
    return {}


def latest_checkpoint(output_dir: str | Path) -> Path | None:
    found = checkpoints(output_dir)
    return found[-1] if found else None


class Trainer:
    """Single-process RL trainer around the core sampler and loss (see the module docstring).

    Everything can be injected (model, tokenizer, prompts, verifier, generator) -- otherwise it is built from
    ``config``. Call :meth:`train`; it returns the run summary.
    """

    def __init__(self, config: TrainConfig, *, model: Any = None, tokenizer: Any = None,
                 train_prompts: Sequence[Prompt] | None = None, eval_prompts: Sequence[Prompt] | None = None,
                 verifier: Any = None, generator: Any = None):
        import torch

        self.config = cfg = config
        _check_report_to(cfg.report_to)
        self.device = _resolve_device(cfg.device)  # before anything loads: a missing GPU fails at once
        builds_data = train_prompts is None or verifier is None or eval_prompts is None
        check_train_inputs(cfg, model=model is None, data=builds_data, verifier=builds_data)  # before any folder
        if cfg.num_threads:
            torch.set_num_threads(cfg.num_threads)
        elif cfg.model == "tiny":
            torch.set_num_threads(1)  # the tiny model's matmuls are too small to gain from more threads
        self.output_dir = Path(cfg.output_dir)
        # Refuse a folder holding another run, validate the checkpoint to resume from; nothing is created yet.
        self.resume_from, self._resume_changes = check_run_folder(cfg)
        self._seed_everything(cfg.seed)
        self.warm_start_info: dict[str, Any] = {}
        self._task: Any = None  # the built-in task, when _load_data built one (the warm start reuses it)

        if train_prompts is None or verifier is None or eval_prompts is None:
            task_train, task_eval, task_verifier = self._load_data()
            train_prompts = task_train if train_prompts is None else train_prompts
            eval_prompts = task_eval if eval_prompts is None else eval_prompts
            verifier = task_verifier if verifier is None else verifier
        self.eval_prompts = list(eval_prompts or [])
        self.stream = PromptStream(train_prompts, cfg.seed)
        self.verifier = watch_verifier(verifier, cfg, self.stream.prompts)  # + signature check and timeout
        if cfg.budget_overdraw != 1.0 and cfg.prompts_per_step > len(self.stream.prompts):
            raise ConfigError(f"budget_overdraw={cfg.budget_overdraw:g} takes {cfg.prompts_per_step} candidate prompts "
                              f"per step (batch_size={cfg.batch_size}), but the training set has only "
                              f"{len(self.stream.prompts)}")

        if model is None:
            model, tokenizer = self._load_model(train_prompts)
        elif tokenizer is None:
            raise ValueError("a model was given without its tokenizer")
        if cfg.lora:
            model = self._wrap_lora(model)
        if self.resume_from is not None:
            self._load_weights(model, self.resume_from)
        self.model, self.tokenizer = model, tokenizer
        self._prompt_ids: dict[Any, list[int]] = {}
        check_prompt_lengths(cfg, model, self.stream.prompts, self.eval_prompts,
                             lambda p: encode_prompt(tokenizer, p, cfg.use_chat_template))  # not cached: memory
        if next(model.parameters()).device != self.device:
            model.to(self.device)
        self.ref_model = self._reference_model() if cfg.kl_coef > 0 else None

        self.generator = generator if generator is not None else self._make_generator()
        self.sampler = make_sampler(cfg, self.generator, self.verifier)
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(params, lr=cfg.learning_rate, weight_decay=cfg.weight_decay)
        warmup = cfg.warmup_steps
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: min(1.0, (s + 1) / warmup) if warmup else 1.0)
        self.step = 0
        self._verifier_offset: dict[str, int] = {}  # counters of the run before a resume
        self.totals = {"samples": 0, "tokens": 0, "optimizer_steps": 0, "wall_seconds": 0.0}
        self.accuracy_before: float | None = None
        self.accuracy_history: list[tuple[int, float]] = []
        if self.resume_from is not None:
            self._load_training_state(self.resume_from)

    # -- building the pieces ----------------------------------------------------------------------------------------
    @staticmethod
    def _seed_everything(seed: int) -> None:
        import torch

        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)

    def _load_data(self) -> tuple[list[Prompt], list[Prompt], Any]:
        from reinforce_ada.data import get_task, load_prompts
        from reinforce_ada.verifiers import get_verifier

        cfg = self.config
        keys = dict(prompt_key=cfg.prompt_key, answer_key=cfg.answer_key, template=cfg.template,
                    system_prompt=cfg.system_prompt)
        if cfg.data is not None:
            train = load_prompts(cfg.data, **keys)
            held_out = load_prompts(cfg.eval_data, **keys, limit=cfg.eval_prompts or None) if cfg.eval_data else []
            verifier_name = cfg.verifier or "math"
        else:
            task = self._task = get_task(cfg.task, **_task_options(cfg))
            train = task.prompts(max(4096, cfg.batch_size * 4), seed=cfg.seed, split="train")
            held_out = (load_prompts(cfg.eval_data, **keys, limit=cfg.eval_prompts or None) if cfg.eval_data
                        else task.prompts(cfg.eval_prompts, seed=cfg.seed + 1, split="test") if cfg.eval_prompts
                        else [])
            verifier_name = cfg.verifier or task.verifier_name
        return train, held_out, get_verifier(verifier_name, **verifier_options(verifier_name, cfg))

    def _load_model(self, train_prompts: Sequence[Prompt]) -> tuple[Any, Any]:
        cfg = self.config
        if cfg.model == "tiny":
            from reinforce_ada.models.loading import cache_dir
            from reinforce_ada.models.warm_start import WarmStartSettings, load_or_warm_start_tiny

            if cfg.data is not None:
                raise ValueError("model='tiny' is warm-started on a built-in task; give --task, or a real --model")
            settings = WarmStartSettings.from_config(cfg)
            # The warm start sees train prompts only; its accuracy checks use a slice of the held-out split
            # different from the prompts the RL run reports on.
            task = self._task
            if task is None:
                from reinforce_ada.data import get_task

                task = get_task(cfg.task, **_task_options(cfg))
            sft_held_out = task.prompts(settings.eval_prompts, seed=cfg.sft_seed + 1000, split="test")
            # The warm start checks accuracy with the task's own verifier (its cache is keyed by the task).
            from reinforce_ada.verifiers import get_verifier

            model, tokenizer, self.warm_start_info = load_or_warm_start_tiny(
                settings, train_prompts, sft_held_out, get_verifier(task.verifier_name), cache_dir())
            return model, tokenizer
        from reinforce_ada.models.loading import load_pretrained

        return load_pretrained(cfg.model, cfg.dtype)

    def _wrap_lora(self, model: Any) -> Any:
        from peft import LoraConfig, get_peft_model

        cfg = self.config
        return get_peft_model(model, LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, target_modules="all-linear",
                                                task_type="CAUSAL_LM"))

    def _reference_model(self) -> Any:
        import copy

        if self.config.lora:
            return None  # the base model with adapters disabled is the reference
        ref = copy.deepcopy(self.model)
        ref.eval()
        for p in ref.parameters():
            p.requires_grad_(False)
        return ref

    def _make_generator(self) -> Any:
        from reinforce_ada.generation import get_generator

        cfg = self.config
        options: dict[str, Any] = dict(max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature,
                                       top_p=cfg.top_p, use_chat_template=cfg.use_chat_template)
        if cfg.generator == "hf":
            options["max_batch_size"] = cfg.generation_batch_size
        else:
            options["gpu_memory_utilization"] = cfg.vllm_gpu_memory_utilization
            options["enable_sleep_mode"] = True  # free the engine's memory while the policy trains
            path = getattr(self.model, "name_or_path", "") or (cfg.model if cfg.model != "smollm2-135m" else "")
            if path:
                options["model_path"] = path
        return get_generator(cfg.generator, self.model, self.tokenizer, **options)

    # -- training ---------------------------------------------------------------------------------------------------
    def train(self) -> dict[str, Any]:
        """Train ``max_steps`` steps; returns the run summary. A run that cannot learn raises
        :class:`~reinforce_ada.guards.RunStopped`, after recording why in ``config_history.jsonl``."""
        try:
            return self._train()
        except RunStopped as err:
            record_event(self.config, {"event": "stopped", "step": self.step, "reason": str(err)})
            raise

    def _train(self) -> dict[str, Any]:
        from tqdm.auto import tqdm

        cfg = self.config
        prepare_run_folder(cfg, self.step, self._resume_changes, resuming=self.resume_from is not None)
        writer = MetricsWriter(self.output_dir, cfg.report_to, asdict(cfg),
                               resume_step=self.step if self.resume_from is not None else None)
        if self.accuracy_before is None and self.eval_prompts:
            self.accuracy_before = self.evaluate()
            self.accuracy_history.append((0, self.accuracy_before))
            writer.write({"step": 0, "eval/accuracy": self.accuracy_before, "total_samples": 0})
            logger.info("held-out sampled accuracy before training: %.1f%%", 100 * self.accuracy_before)
        progress = tqdm(total=cfg.max_steps, initial=self.step, desc="train", unit="step", dynamic_ncols=True)
        try:
            while self.step < cfg.max_steps:
                metrics = self.train_step()
                if cfg.eval_steps and self.step % cfg.eval_steps == 0 and self.step < cfg.max_steps and \
                        self.eval_prompts:
                    metrics["eval/accuracy"] = self.evaluate()
                    self.accuracy_history.append((self.step, metrics["eval/accuracy"]))
                writer.write(metrics)
                progress.update(1)
                progress.set_postfix(reward=f"{metrics['sampling/reward_mean']:.2f}",
                                     samples=int(metrics["total_samples"]),
                                     rounds=int(metrics["sampling/rounds_used"]),
                                     zero_var=f"{metrics['sampling/zero_variance_fraction']:.2f}")
                if cfg.save_steps and self.step % cfg.save_steps == 0 and self.step < cfg.max_steps:
                    self.save_checkpoint()
        finally:
            progress.close()
        # Checkpoint before the final evaluation, so a run resumed from here continues exactly as an
        # uninterrupted one would (evaluation draws from the same RNG as sampling).
        self.save_checkpoint()
        accuracy_after = None
        if self.eval_prompts:
            accuracy_after = self.evaluate()
            self.accuracy_history.append((self.step, accuracy_after))
            writer.write({"step": self.step, "eval/accuracy": accuracy_after,
                          "total_samples": self.totals["samples"]})
        writer.close()
        summary = self.summary(accuracy_after)
        write_atomic(self.output_dir / "summary.json", json.dumps(summary, indent=2))
        try:
            from reinforce_ada.plotting import plot_runs

            plot_runs([self.output_dir], self.output_dir / "plots")
        except Exception as err:  # noqa: BLE001 -- a plotting problem must not lose a finished run
            logger.warning("could not write plots: %r", err)
        return summary

    def summary(self, accuracy_after: float | None) -> dict[str, Any]:
        return {
            "accuracy_before": self.accuracy_before,
            "accuracy_after": accuracy_after,
            "total_samples": self.totals["samples"],
            "total_tokens": self.totals["tokens"],
            "optimizer_steps": self.totals["optimizer_steps"],
            "steps": self.step,
            "wall_seconds": round(self.totals["wall_seconds"], 2),
            "strategy": self.config.strategy,
            "model": self.config.model,
            "warm_start": self.warm_start_info,
            "accuracy_history": self.accuracy_history,
        }

    def train_step(self) -> dict[str, Any]:
        """Sample one batch and update the policy on it; returns the step's metrics."""
        cfg = self.config
        started = time.perf_counter()
        self.verifier.start_window()
        if hasattr(self.generator, "load_weights") and cfg.generator != "hf":
            self.generator.load_weights(self.model)
        if cfg.strategy == "dapo":
            batch = self.sampler.sample(self.stream)
        else:
            # ada-budget with budget_overdraw: more candidates than the budget trains on; the skipped ones are
            # consumed from this epoch's order like the others and come back in the next epoch
            batch = self.sampler.sample(self.stream.take(cfg.prompts_per_step))
        sampled = time.perf_counter()
        check_verifier_failures(f"step {self.step + 1}", int(batch.metrics["num_verifier_failures"]),
                                int(batch.metrics["total_samples"]), cfg.max_verifier_failure_rate, self.verifier)
        if hasattr(self.generator, "sleep"):
            self.generator.sleep()  # vLLM: release the KV cache during the update; generate() wakes it
        sequences = self._sequences(batch)
        rewards = [abs(c.reward) for g in batch.groups for c in g.completions if c.reward is not None]
        check_finite(self.step + 1, "the advantages", sequences["advantages"],
                     f"the largest |reward| is {max(rewards, default=0.0):.3g}; rewards must stay well inside float32")
        if sequences["weights"] is not None:
            check_finite(self.step + 1, "the importance weights", sequences["weights"])
        update_metrics = self._update(sequences) if sequences["input_ids"].shape[0] else {}
        self.step += 1
        generated_tokens = sum(len(c.token_ids) for p in batch.pools.values() for c in p.completions)
        self.totals["samples"] += int(batch.metrics["total_samples"])
        self.totals["tokens"] += generated_tokens
        elapsed = time.perf_counter() - started
        self.totals["wall_seconds"] += elapsed
        metrics: dict[str, Any] = {"step": self.step}
        metrics.update({f"sampling/{k}": v for k, v in batch.metrics.items()})
        metrics.update({f"train/{k}": v for k, v in update_metrics.items()})
        metrics.update({
            "total_samples": self.totals["samples"],
            "total_tokens": self.totals["tokens"],
            "train/lr": self.scheduler.get_last_lr()[0],
            "train/num_sequences": int(sequences["input_ids"].shape[0]),
            "time/sampling_seconds": sampled - started,
            "time/step_seconds": elapsed,
        })
        if batch.generation_error:
            metrics["sampling/generation_error"] = batch.generation_error
        # Running counters of the reward function (completions scored, timeouts, failures, ...), when it keeps them.
        metrics.update({f"verifier/{k}": v + self._verifier_offset.get(k, 0)
                        for k, v in verifier_stats(self.verifier).items()})
        return metrics

    def _prompt_token_ids(self, prompt: Prompt) -> list[int]:
        ids = self._prompt_ids.get(prompt.prompt_id)
        if ids is None:
            ids = encode_prompt(self.tokenizer, prompt, self.config.use_chat_template)
            self._prompt_ids[prompt.prompt_id] = ids
        return ids

    def _sequences(self, batch: SampledBatch) -> dict[str, Any]:
        """Right-padded ``prompt + completion`` tensors with a mask over completion tokens."""
        import torch

        rows: list[tuple[list[int], Completion]] = [
            (self._prompt_token_ids(group.prompt), c) for group in batch.groups for c in group.completions]
        keep = [i for i, (_, c) in enumerate(rows) if len(c.token_ids) > 0]
        length = max((len(p) + len(c.token_ids) for p, c in rows), default=1)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        input_ids = torch.full((len(keep), length), pad, dtype=torch.long)
        attention = torch.zeros((len(keep), length), dtype=torch.long)
        response_mask = torch.zeros((len(keep), length), dtype=torch.float32)
        for row, i in enumerate(keep):
            prompt_ids, completion = rows[i]
            ids = prompt_ids + list(completion.token_ids)
            input_ids[row, : len(ids)] = torch.tensor(ids)
            attention[row, : len(ids)] = 1
            response_mask[row, len(prompt_ids): len(ids)] = 1.0
        advantages = torch.tensor(batch.advantages[keep], dtype=torch.float32)
        weights = torch.tensor(batch.weights[keep], dtype=torch.float32) if batch.weights is not None else None
        return {"input_ids": input_ids, "attention_mask": attention, "response_mask": response_mask,
                "advantages": advantages, "weights": weights}

    def _token_logprobs(self, model: Any, input_ids: Any, attention_mask: Any, with_entropy: bool = False):
        """Log-probabilities ``(B, L)`` of each token given its prefix (position 0 gets 0), at the sampling
        temperature, and optionally the entropies of the same distributions."""
        import torch

        logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1].float()
        logits = logits / self.config.temperature
        log_norm = torch.logsumexp(logits, dim=-1)  # (B, L-1)
        token_logits = logits.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
        logprobs = torch.nn.functional.pad(token_logits - log_norm, (1, 0))  # (B, L)
        entropy = None
        if with_entropy:
            probs = torch.softmax(logits, dim=-1)
            entropy = torch.nn.functional.pad(log_norm - (probs * logits).sum(-1), (1, 0))
        return logprobs, entropy

    def _update(self, seq: dict[str, Any]) -> dict[str, float]:
        """``ppo_epochs`` passes of PPO-clip over the step's sequences, in mini-batches with accumulation."""
        import torch

        from reinforce_ada.core.losses import ppo_clip_loss

        cfg = self.config
        num = seq["input_ids"].shape[0]
        mini = cfg.mini_batch_size or num
        single_pass = cfg.ppo_epochs == 1 and mini >= num
        to = lambda t: t.to(self.device) if t is not None else None  # noqa: E731
        old_logprobs = ref_logprobs = None
        if not single_pass:
            old_logprobs = self._no_grad_logprobs(self.model, seq)
        if cfg.kl_coef > 0:
            if self.ref_model is not None:
                ref_logprobs = self._no_grad_logprobs(self.ref_model, seq)
            else:
                with self.model.disable_adapter():
                    ref_logprobs = self._no_grad_logprobs(self.model, seq)
        generator = torch.Generator().manual_seed(cfg.seed * 7919 + self.step)
        sums: dict[str, float] = {}
        count = 0
        self.model.train()
        for _ in range(cfg.ppo_epochs):
            order = torch.randperm(num, generator=generator)
            for start in range(0, num, mini):
                idx = order[start:start + mini]
                mask_total = seq["response_mask"][idx].sum().clamp(min=1)
                self.optimizer.zero_grad(set_to_none=True)
                for micro_start in range(0, len(idx), cfg.micro_batch_size):
                    micro = idx[micro_start:micro_start + cfg.micro_batch_size]
                    input_ids, attention = to(seq["input_ids"][micro]), to(seq["attention_mask"][micro])
                    mask = to(seq["response_mask"][micro])
                    logprobs, entropy = self._token_logprobs(self.model, input_ids, attention,
                                                             with_entropy=cfg.entropy_coef > 0)
                    old = logprobs.detach() if old_logprobs is None else to(old_logprobs[micro])
                    loss, metrics = ppo_clip_loss(
                        logprobs, old, to(seq["advantages"][micro]), mask,
                        clip_ratio_low=cfg.clip_ratio_low, clip_ratio_high=cfg.clip_ratio_high,
                        clip_ratio_c=cfg.clip_ratio_c, loss_agg_mode=cfg.loss_agg_mode, entropy=entropy,
                        entropy_coef=cfg.entropy_coef,
                        ref_logprobs=to(ref_logprobs[micro]) if ref_logprobs is not None else None,
                        kl_coef=cfg.kl_coef,
                        sample_weights=to(seq["weights"][micro]) if seq["weights"] is not None else None)
                    # Weight each micro-batch so the accumulated loss equals the mini-batch's aggregate.
                    if cfg.loss_agg_mode == "token-mean":
                        share = float(mask.sum() / mask_total)
                    else:
                        share = len(micro) / len(idx)
                    check_finite(self.step + 1, "the loss", loss.detach())
                    (loss * share).backward()
                    for key, value in metrics.items():
                        sums[key] = sums.get(key, 0.0) + value * share
                params = [p for p in self.model.parameters() if p.requires_grad]
                grad_norm = torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm if cfg.max_grad_norm else
                                                           float("inf"))
                check_finite(self.step + 1, "the gradient norm", grad_norm)
                sums["grad_norm"] = sums.get("grad_norm", 0.0) + float(grad_norm)
                self.optimizer.step()
                self.scheduler.step()
                self.totals["optimizer_steps"] += 1
                count += 1
        return {key: value / count for key, value in sums.items()}

    def _no_grad_logprobs(self, model: Any, seq: dict[str, Any]) -> Any:
        import torch

        chunks = []
        was_training = model.training
        model.eval()
        with torch.no_grad():
            for start in range(0, seq["input_ids"].shape[0], self.config.micro_batch_size):
                sl = slice(start, start + self.config.micro_batch_size)
                logprobs, _ = self._token_logprobs(model, seq["input_ids"][sl].to(self.device),
                                                   seq["attention_mask"][sl].to(self.device))
                chunks.append(logprobs.cpu())
        model.train(was_training)
        return torch.cat(chunks)

    # -- evaluation -------------------------------------------------------------------------------------------------
    def evaluate(self) -> float:
        """Held-out sampled accuracy: the share of ``eval_samples`` samples per prompt that are positive.

        Stops the run (rather than report a made-up accuracy) when the verifier could not score enough of them."""
        return scored_accuracy(self.generator, self.verifier, self.eval_prompts, self.config,
                               where=f"held-out evaluation at step {self.step}")

    # -- checkpoints ------------------------------------------------------------------------------------------------
    def save_checkpoint(self) -> Path:
        """Write ``checkpoint-{step}`` atomically: into a temporary folder, then renamed into place. A failed write
        (e.g. disk full) removes the temporary folder and names the file it was writing."""
        final = self.output_dir / f"checkpoint-{self.step}"
        tmp = self.output_dir / f".tmp-checkpoint-{self.step}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        written: list[Path] = [tmp / "model"]
        try:
            self._write_checkpoint(tmp, written)
        except (OSError, RuntimeError) as err:  # a full disk surfaces as RuntimeError from torch.save
            shutil.rmtree(tmp, ignore_errors=True)
            raise OSError(f"could not write {final.name} in {self.output_dir}: writing {written[-1].name} failed: "
                          f"{err}") from err
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        logger.info("saved %s", final)
        return final

    def _write_checkpoint(self, tmp: Path, written: list[Path]) -> None:
        """The files of a checkpoint; ``written`` gets each path before it is written (for error messages)."""
        import torch
        from transformers.utils import logging as hf_logging

        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # no "Writing model shards" bar inside our own progress bar
        try:
            self.model.save_pretrained(tmp / "model", safe_serialization=True)
        finally:
            if bars:
                hf_logging.enable_progress_bar()
        self.tokenizer.save_pretrained(tmp / "model")
        for name, obj in (("optimizer.pt", self.optimizer.state_dict()), ("scheduler.pt", self.scheduler.state_dict())):
            written.append(tmp / name)
            torch.save(obj, tmp / name)
        version, internal, gauss = random.getstate()
        name, keys, pos, has_gauss, cached = np.random.get_state()
        written.append(tmp / "rng_state.pt")
        torch.save({
            "python": [version, list(internal), gauss],
            "numpy": [name, keys.tolist(), pos, has_gauss, cached],
            "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        }, tmp / "rng_state.pt")
        counters = {k: v + self._verifier_offset.get(k, 0) for k, v in verifier_stats(self.verifier).items()}
        state = {"step": self.step, "totals": self.totals, "accuracy_before": self.accuracy_before,
                 "accuracy_history": self.accuracy_history, "stream": self.stream.state_dict(),
                 "sampler": _jsonable(self.sampler.state_dict()), "warm_start": self.warm_start_info,
                 "verifier_stats": counters, "config": asdict(self.config)}
        written.append(tmp / "trainer_state.json")
        (tmp / "trainer_state.json").write_text(json.dumps(state, indent=2))

    def _load_weights(self, model: Any, checkpoint: Path) -> None:
        from safetensors.torch import load_file

        files = sorted((checkpoint / "model").glob("*.safetensors"))
        if not files:
            raise FileNotFoundError(f"{checkpoint / 'model'} holds no .safetensors weights")
        state: dict[str, Any] = {}
        for f in files:
            state.update(load_checkpoint_file(checkpoint, f, lambda path: load_file(str(path))))
        if self.config.lora:
            from peft import set_peft_model_state_dict

            set_peft_model_state_dict(model, state)
        else:
            missing, unexpected = model.load_state_dict(state, strict=False)
            tied = set(getattr(model, "_tied_weights_keys", None) or [])
            missing = [k for k in missing if k not in tied and "lm_head" not in k]
            if missing or unexpected:
                raise RuntimeError(f"checkpoint {checkpoint} does not match the model: missing {missing[:5]}, "
                                   f"unexpected {unexpected[:5]}")
        logger.info("resumed weights from %s", checkpoint)

    def _load_training_state(self, checkpoint: Path) -> None:
        import torch

        def load(name: str) -> Any:
            return load_checkpoint_file(checkpoint, checkpoint / name, lambda p: torch.load(p, weights_only=True))

        optimizer_state, scheduler_state, rng = load("optimizer.pt"), load("scheduler.pt"), load("rng_state.pt")
        # A file that loads but does not fit (another model, a tampered state) is named too.
        load_checkpoint_file(checkpoint, checkpoint / "optimizer.pt",
                             lambda _: self.optimizer.load_state_dict(optimizer_state))
        load_checkpoint_file(checkpoint, checkpoint / "scheduler.pt",
                             lambda _: self.scheduler.load_state_dict(scheduler_state))
        version, internal, gauss = rng["python"]
        random.setstate((version, tuple(internal), gauss))
        name, keys, pos, has_gauss, cached = rng["numpy"]
        np.random.set_state((name, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))
        torch.set_rng_state(rng["torch"])
        if rng["cuda"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(rng["cuda"])
        state = read_trainer_state(checkpoint)
        self.step = state["step"]
        self.totals = state["totals"]
        self.accuracy_before = state["accuracy_before"]
        self.accuracy_history = [tuple(x) for x in state["accuracy_history"]]
        self.warm_start_info = state.get("warm_start", self.warm_start_info)
        self.stream.load_state_dict(state["stream"])
        self.sampler.load_state_dict(state["sampler"])
        self._verifier_offset = dict(state.get("verifier_stats", {}))


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.integer):
        return int(obj)
    return obj
