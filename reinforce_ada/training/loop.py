"""The standalone trainer's loop: Reinforce-Ada (or GRPO / DAPO) with a token-level PPO-clip loss, in one process.

Each step:
  1. draw ``batch_size`` prompts (a seeded, epoch-shuffled :class:`~reinforce_ada.data.stream.PromptStream`;
     ``ada-budget`` with ``budget_overdraw``: that many times more candidates, of which the budget trains on
     ``batch_size``);
  2. sample them with the core sampler (rounds, exits, selection, whole-pool advantages);
  3. rebuild ``prompt + completion`` token sequences and compute the old policy's log-probabilities; when the
     generator returned its own log-probabilities of the sampled tokens, log the rollout/trainer mismatch
     (``mismatch/*``), stop on a stale engine and, with ``rollout_correction``, apply truncated importance sampling;
  4. ``ppo_epochs`` passes of mini-batches of :func:`reinforce_ada.core.losses.ppo_clip_loss`, AdamW with
     warm-up and gradient clipping (:mod:`reinforce_ada.training.update`).
The step's metrics go to ``metrics.jsonl`` (and tensorboard / wandb when asked; :mod:`.metrics`); checkpoints hold
everything needed to continue bit-for-bit on CPU (:mod:`.checkpoint`). The pieces are built by :mod:`.setup`.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence

from reinforce_ada.config import ConfigError, TrainConfig
from reinforce_ada.data.stream import PromptStream
from reinforce_ada.generation.prompting import encode_prompt
from reinforce_ada.evaluation import sampled_accuracy
from reinforce_ada.training.guards import (GenerationStopped, RunStopped, check_finite, check_prompt_lengths,
                                          check_verifier_failures, watch_verifier)
from reinforce_ada.training.preflight import check_train_inputs
from reinforce_ada.training.run_data import data_fingerprint
from reinforce_ada.training.run_folder import (RunFolderError, RunLock, check_run_folder, prepare_run_folder,
                                               read_trainer_state, record_event, recover_checkpoints, unusable,
                                               write_atomic)
from reinforce_ada.sampling.factory import build_sampler
from reinforce_ada.sampling.protocols import FatalGenerationError
from reinforce_ada.training.checkpoint import (add_final_evaluation, jsonable, load_final_evaluation,
                                               load_training_state, load_weights, save_checkpoint, set_rng_state,
                                               write_checkpoint)
from reinforce_ada.training.setup import (check_report_to, load_data, load_model, make_generator, reference_model,
                                          resolve_device, seed_everything, wrap_lora)
from reinforce_ada.training.update import evaluation_mismatch, ppo_update, sequences
from reinforce_ada.training.metrics import MetricsWriter
from reinforce_ada.types import Prompt
from reinforce_ada.verifiers.registry import verifier_stats

logger = logging.getLogger(__name__)


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
        check_report_to(cfg.report_to)
        self.device = resolve_device(cfg.device)  # before anything loads: a missing GPU fails at once
        builds_data = train_prompts is None or verifier is None or eval_prompts is None
        check_train_inputs(cfg, model=model is None, data=builds_data, verifier=builds_data,
                           generator=generator is None)  # before any folder
        if cfg.num_threads:
            torch.set_num_threads(cfg.num_threads)
        elif cfg.model == "tiny":
            torch.set_num_threads(1)  # the tiny model's matmuls are too small to gain from more threads
        self.output_dir = Path(cfg.output_dir)
        # One writer per run folder, for the run's life (released by train() and close()); a failed start releases
        # it and leaves no folder it created.
        self._lock = RunLock(self.output_dir)
        try:
            self._build(model, tokenizer, train_prompts, eval_prompts, verifier, generator)
        except BaseException:
            self._lock.release(remove_if_unused=True)
            raise

    def _build(self, model: Any, tokenizer: Any, train_prompts: Sequence[Prompt] | None,
               eval_prompts: Sequence[Prompt] | None, verifier: Any, generator: Any) -> None:
        import torch

        cfg = self.config
        recover_checkpoints(self.output_dir)  # a checkpoint a kill left aside while replacing it
        # Refuse a folder holding another run, validate the checkpoint to resume from; nothing else is created yet.
        self.resume_from, self._resume_changes = check_run_folder(cfg)
        seed_everything(cfg.seed)
        self.warm_start_info: dict[str, Any] = {}
        self._task: Any = None  # the built-in task, when _load_data built one (the warm start reuses it)

        if train_prompts is None or verifier is None or eval_prompts is None:
            task_train, task_eval, task_verifier = self._load_data()
            train_prompts = task_train if train_prompts is None else train_prompts
            eval_prompts = task_eval if eval_prompts is None else eval_prompts
            verifier = task_verifier if verifier is None else verifier
        self.eval_prompts = list(eval_prompts or [])
        self.stream = PromptStream(train_prompts, cfg.seed)
        self.data_fingerprint = data_fingerprint(self.stream.prompts)
        self._data_changed = self.resume_from is not None and self._check_data(self.resume_from)
        self.verifier = watch_verifier(verifier, cfg, self.stream.prompts)  # + signature check and timeout
        if cfg.sampler.budget_overdraw != 1.0 and cfg.prompts_per_step > len(self.stream.prompts):
            raise ConfigError(f"budget_overdraw={cfg.sampler.budget_overdraw:g} takes {cfg.prompts_per_step} "
                              f"candidate prompts per step (batch_size={cfg.batch_size}), but the training set has "
                              f"only {len(self.stream.prompts)}")

        if model is None:
            model, tokenizer, self.warm_start_info = load_model(cfg, train_prompts, self._task)
        elif tokenizer is None:
            raise ValueError("a model was given without its tokenizer")
        if cfg.lora:
            model = wrap_lora(cfg, model)
        # The KL term's reference is the start model: copied before a resume loads the checkpoint's weights (a
        # copy of the resumed weights would anchor the KL to the checkpoint, not to where the run started).
        self.ref_model = reference_model(cfg, model) if cfg.kl_coef > 0 else None
        if self.resume_from is not None:
            load_weights(model, self.resume_from, cfg.lora)
        self.model, self.tokenizer = model, tokenizer
        self._prompt_ids: dict[Any, list[int]] = {}
        check_prompt_lengths(cfg, model, self.stream.prompts, self.eval_prompts,
                             lambda p: encode_prompt(tokenizer, p, cfg.use_chat_template))  # not cached: memory
        if next(model.parameters()).device != self.device:
            model.to(self.device)
            if self.ref_model is not None:
                self.ref_model.to(self.device)

        self._generator = generator if generator is not None else make_generator(cfg, model, tokenizer)
        self._weights_version = 0  # counts the updates of the model's weights
        self._synced_version: int | None = None  # the version the generator holds (None: not synced yet)
        self.eval_metrics: dict[str, float] = {}  # the last evaluation's eval/* metrics
        self.sampler = build_sampler(cfg.sampler_config(), self._generator, self.verifier)
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
        self.final_evaluation: dict[str, Any] | None = None  # recorded in the checkpoint a finished run resumes
        self._resumed_step: int | None = None
        self.nothing_to_do: str | None = None  # why a resumed run has nothing to do (it changes nothing then)
        if self.resume_from is not None:
            self._load_training_state(self.resume_from)

    def _check_data(self, checkpoint: Path) -> bool:
        """Whether the training prompts differ from those ``checkpoint`` was trained on (its fingerprint: row count
        and SHA-256); refused unless ``force_resume_changes``, which records the change. Checked before anything
        in the folder is rewritten."""
        saved = read_trainer_state(checkpoint).get("data")
        if saved is None or saved == self.data_fingerprint:  # a checkpoint from before fingerprints: not checked
            return False
        source = self.config.data or f"task {self.config.task}"
        change = (f"the training data ({source}) is not what {checkpoint} was trained on: {saved['rows']} rows with "
                  f"SHA-256 {saved['sha256'][:12]}... then, {self.data_fingerprint['rows']} rows with SHA-256 "
                  f"{self.data_fingerprint['sha256'][:12]}... now")
        if not self.config.force_resume_changes:
            raise RunFolderError(f"--resume: {change}; put the original data back, pass --force-resume-changes to "
                                 f"continue on the new data (recorded in config_history.jsonl), or use another "
                                 f"--output-dir")
        logger.warning("--force-resume-changes: %s", change)
        self._resume_changes = {**self._resume_changes, "data": (saved, self.data_fingerprint)}
        return True

    def _load_data(self) -> tuple[list[Prompt], list[Prompt], Any]:
        """Train prompts, held-out prompts and verifier from the config (the built-in task is kept for the warm
        start)."""
        train, held_out, verifier, self._task = load_data(self.config)
        return train, held_out, verifier

    # -- training ---------------------------------------------------------------------------------------------------
    def train(self) -> dict[str, Any]:
        """Train ``max_steps`` steps; returns the run summary. A run that cannot learn raises
        :class:`~reinforce_ada.training.guards.RunStopped`, after recording why in ``config_history.jsonl``; so does a
        generator that cannot serve another request (:class:`~reinforce_ada.sampling.protocols.FatalGenerationError`,
        e.g. a dead vLLM engine), which the CLI then ends with exit 3 and the one-line cause."""
        try:
            if self.nothing_to_do is not None:  # a finished run resumed with no more steps: nothing is written
                logger.warning("%s", self.nothing_to_do)
                return json.loads((self.output_dir / "summary.json").read_text())
            try:
                return self._train()
            except FatalGenerationError as err:  # a dead engine: never retried, the run stops with the cause
                raise GenerationStopped(f"step {self.step + 1}: the generator failed for good and was not retried: "
                                        f"{' '.join(str(err).split())}") from err
        except RunStopped as err:
            record_event(self.config, {"event": "stopped", "step": self.step, "reason": str(err)})
            raise
        except KeyboardInterrupt:  # Ctrl-C, SIGINT, or a reward function raising it: the record says so
            record_event(self.config, {"event": "stopped", "step": self.step,
                                       "reason": f"interrupted (KeyboardInterrupt) during step {self.step + 1}"})
            raise
        finally:
            self._lock.release()

    def _train(self) -> dict[str, Any]:
        from tqdm.auto import tqdm

        cfg = self.config
        prepare_run_folder(cfg, self.step, self._resume_changes, resuming=self.resume_from is not None)
        writer = MetricsWriter(self.output_dir, cfg.report_to, asdict(cfg),
                               resume_step=self.step if self.resume_from is not None else None,
                               keep_final_evaluation=self.final_evaluation is not None)
        if self.accuracy_before is None and self.eval_prompts:
            self.accuracy_before = self.evaluate()
            self.accuracy_history.append((0, self.accuracy_before))
            writer.write({"step": 0, **self.eval_metrics, "total_samples": 0})
            logger.info("held-out sampled accuracy before training: %.1f%%", 100 * self.accuracy_before)
        progress = tqdm(total=cfg.max_steps, initial=self.step, desc="train", unit="step", dynamic_ncols=True)
        try:
            while self.step < cfg.max_steps:
                metrics = self.train_step()
                if cfg.eval_steps and self.step % cfg.eval_steps == 0 and self.step < cfg.max_steps and \
                        self.eval_prompts:
                    self.accuracy_history.append((self.step, self.evaluate()))
                    metrics.update(self.eval_metrics)
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
        accuracy_after = None
        if self.step == self._resumed_step and self.final_evaluation is not None:
            accuracy_after = self.final_evaluation["accuracy"]  # killed after its final evaluation: already there
        else:
            # Checkpoint before the final evaluation (evaluation draws from the same RNG as sampling), so a run
            # resumed from here continues exactly as an uninterrupted one would; a checkpoint resumed at this very
            # step is already on disk and is not rewritten.
            checkpoint = (self.resume_from if self.step == self._resumed_step and self.resume_from is not None
                          else self.save_checkpoint())
            if self.eval_prompts:
                accuracy_after = self.evaluate()
                self.accuracy_history.append((self.step, accuracy_after))
                writer.write({"step": self.step, **self.eval_metrics, "total_samples": self.totals["samples"]})
                # ... and the evaluation with the RNG state after it, for a run that extends this one
                add_final_evaluation(checkpoint, accuracy_after, self._verifier_counters())
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
        self._sync_generator()
        if cfg.strategy == "dapo":
            batch = self.sampler.sample(self.stream)
        else:
            # ada-budget with budget_overdraw: more candidates than the budget trains on; the skipped ones are
            # consumed from this epoch's order like the others and come back in the next epoch
            batch = self.sampler.sample(self.stream.take(cfg.prompts_per_step))
        sampled = time.perf_counter()
        check_verifier_failures(f"step {self.step + 1}", int(batch.metrics["num_verifier_failures"]),
                                int(batch.metrics["total_samples"]), cfg.max_verifier_failure_rate, self.verifier)
        if hasattr(self._generator, "sleep"):
            self._generator.sleep()  # vLLM: release the KV cache during the update; generate() wakes it
        seqs = sequences(batch, self.tokenizer.pad_token_id, self._prompt_token_ids)
        rewards = [abs(c.reward) for g in batch.groups for c in g.completions if c.reward is not None]
        check_finite(self.step + 1, "the advantages", seqs["advantages"],
                     f"the largest |reward| is {max(rewards, default=0.0):.3g}; rewards must stay well inside float32")
        if seqs["weights"] is not None:
            check_finite(self.step + 1, "the importance weights", seqs["weights"])
        update_metrics = self._update(seqs) if seqs["input_ids"].shape[0] else {}
        self.step += 1
        generated_tokens = sum(len(c.token_ids) for p in batch.pools.values() for c in p.completions)
        self.totals["samples"] += int(batch.metrics["total_samples"])
        self.totals["tokens"] += generated_tokens
        elapsed = time.perf_counter() - started
        self.totals["wall_seconds"] += elapsed
        metrics: dict[str, Any] = {"step": self.step}
        metrics.update({f"sampling/{k}": v for k, v in batch.metrics.items()})
        # the update's metrics are train/*, except those named with their own room (mismatch/*)
        metrics.update({(k if "/" in k else f"train/{k}"): v for k, v in update_metrics.items()})
        metrics.update({
            "total_samples": self.totals["samples"],
            "total_tokens": self.totals["tokens"],
            "train/lr": self.scheduler.get_last_lr()[0],
            "train/num_sequences": int(seqs["input_ids"].shape[0]),
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

    def _update(self, seq: dict[str, Any]) -> dict[str, float]:
        """``ppo_epochs`` passes of PPO-clip over the step's sequences (see :func:`.update.ppo_update`)."""
        metrics = ppo_update(self.model, self.ref_model, self.optimizer, self.scheduler, seq, self.config,
                             self.device, self.step, self.totals)
        self._weights_version += 1
        return metrics

    # -- the generator and the weights it samples from ---------------------------------------------------------------
    @property
    def generator(self) -> Any:
        """The generation backend, holding the weights being trained: an engine with weights of its own (vLLM, a
        server) is synced to the trainer's model first when they changed since its last sync -- so the held-out
        evaluation, ``evaluate``/``estimate_pass_rates`` called on a live trainer's generator, or anything else that
        samples from ``trainer.generator`` sees the current policy."""
        self._sync_generator()
        return self._generator

    def _sync_generator(self) -> None:
        """Push the model's weights into the generator if they changed since it last took them (the ``hf`` backend
        samples the live model itself and has nothing to sync)."""
        if self._synced_version == self._weights_version or self.config.generator == "hf":
            return
        if hasattr(self._generator, "load_weights"):
            self._generator.load_weights(self.model)
        self._synced_version = self._weights_version

    # -- evaluation -------------------------------------------------------------------------------------------------
    def evaluate(self) -> float:
        """Held-out sampled accuracy: the share of ``eval_samples`` samples per prompt that are positive, sampled
        from the weights being trained (the generator is synced first); its metrics, with the generator's
        rollout/trainer mismatch on these samples, are kept in :attr:`eval_metrics`.

        Stops the run (rather than report a made-up accuracy) when the verifier could not score enough of them, or
        when the generator's log-probabilities show it sampled from other weights (the training steps' check)."""
        where = f"held-out evaluation at step {self.step}"
        generator = self.generator  # synced to the current weights
        self.verifier.start_window()
        counts = sampled_accuracy(generator, self.verifier, self.eval_prompts, self.config.eval_samples,
                                  self.config.positive_threshold)
        check_verifier_failures(where, counts.num_verifier_failures, counts.num_samples,
                                self.config.max_verifier_failure_rate, self.verifier)
        mismatch = {}
        if self.config.generator != "hf":  # an engine with weights of its own: check it sampled from the model's
            rows = [(self._prompt_token_ids(p), c) for p, outputs in zip(self.eval_prompts, counts.outputs)
                    for c in outputs]
            mismatch = evaluation_mismatch(self.model, rows, self.tokenizer.pad_token_id, self.config, self.device,
                                           where)
        self.eval_metrics = {"eval/accuracy": counts.accuracy, **mismatch}
        return counts.accuracy

    def close(self) -> None:
        """Release the generator (a vLLM engine and the checkpoint folder it was built from) and the run folder;
        the trainer cannot sample afterwards."""
        self._lock.release()
        if callable(getattr(self._generator, "close", None)):
            self._generator.close()

    # -- checkpoints ------------------------------------------------------------------------------------------------
    def save_checkpoint(self) -> Path:
        """Write ``checkpoint-{step}`` atomically (see :func:`reinforce_ada.training.checkpoint.save_checkpoint`)."""
        return save_checkpoint(self.output_dir, self.step, self._write_checkpoint)

    def _verifier_counters(self) -> dict[str, int]:
        return {k: v + self._verifier_offset.get(k, 0) for k, v in verifier_stats(self.verifier).items()}

    def _write_checkpoint(self, folder: Path, written: list[Path]) -> None:
        counters = self._verifier_counters()
        state = {"step": self.step, "totals": self.totals, "accuracy_before": self.accuracy_before,
                 "accuracy_history": self.accuracy_history, "stream": self.stream.state_dict(),
                 "sampler": jsonable(self.sampler.state_dict()), "warm_start": self.warm_start_info,
                 "verifier_stats": counters, "data": self.data_fingerprint,
                 "config": asdict(self.config)}
        write_checkpoint(folder, written, self.model, self.tokenizer, self.optimizer, self.scheduler, state)

    def _load_training_state(self, checkpoint: Path) -> None:
        state = load_training_state(checkpoint, self.optimizer, self.scheduler)
        self.step = state["step"]
        self.totals = state["totals"]
        self.accuracy_before = state["accuracy_before"]
        self.accuracy_history = [tuple(x) for x in state["accuracy_history"]]
        self.warm_start_info = state.get("warm_start", self.warm_start_info)
        stream = dict(state["stream"])
        if self._data_changed:  # forced onto other data: the old order means nothing; a new epoch starts
            stream["position"] = min(stream["position"], len(self.stream.prompts))
        try:
            self.stream.load_state_dict(stream)
        except ValueError as err:
            raise unusable(checkpoint, f"{checkpoint / 'trainer_state.json'}: {err}") from None
        self.sampler.load_state_dict(state["sampler"])
        self._verifier_offset = dict(state.get("verifier_stats", {}))
        self._resumed_step = self.step
        self.final_evaluation = load_final_evaluation(checkpoint)
        cfg = self.config
        if self.final_evaluation is None:
            return
        if self.step >= cfg.max_steps and (self.output_dir / "summary.json").exists():
            self.nothing_to_do = (f"nothing to do: {self.output_dir} is already at step {self.step} (max_steps "
                                  f"{cfg.max_steps}) and finished; give a larger --max-steps to extend it")
            return
        self.accuracy_history.append((self.step, self.final_evaluation["accuracy"]))
        if cfg.eval_steps and self.step % cfg.eval_steps == 0 and self.step < cfg.max_steps and self.eval_prompts:
            # an uninterrupted longer run evaluates at this step too: continue from the RNG state after it
            set_rng_state(self.final_evaluation["rng"])
            self._verifier_offset = dict(self.final_evaluation["verifier_stats"])
