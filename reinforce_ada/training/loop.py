"""The standalone trainer's loop: Reinforce-Ada (or GRPO / DAPO) with a token-level PPO-clip loss, in one process.

Each step:
  1. draw ``batch_size`` prompts (a seeded, epoch-shuffled :class:`~reinforce_ada.data.stream.PromptStream`;
     ``ada-budget`` with ``budget_overdraw``: that many times more candidates, of which the budget trains on
     ``batch_size``);
  2. sample them with the core sampler (rounds, exits, selection, whole-pool advantages);
  3. rebuild ``prompt + completion`` token sequences and compute the old policy's log-probabilities; when the
     generator returned its own log-probabilities of the sampled tokens, log the rollout/trainer mismatch
     (``mismatch/*``), stop on a stale engine and, with ``rollout_correction``, apply truncated importance sampling;
  4. ``ppo_epochs`` passes of mini-batches of the policy loss (PPO-clip by default), AdamW with warm-up and
     gradient clipping (:class:`~reinforce_ada.training.update.PolicyUpdate`).
The step's metrics go to ``metrics.jsonl`` (and tensorboard / wandb when asked; :mod:`.metrics`); checkpoints hold
everything needed to continue bit-for-bit on CPU (:mod:`reinforce_ada.runs.checkpoint`). The pieces are built by
:mod:`.setup`; where the run starts -- fresh, resumed or extended -- is one
:class:`~reinforce_ada.runs.resume.StartState`, so the loop itself never asks.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence

from reinforce_ada.config import TrainConfig, model_kind
from reinforce_ada.errors import Signalled
from reinforce_ada.data.stream import PromptStream
from reinforce_ada.difficulty import STRATA_FILE, Strata
from reinforce_ada.evaluation import sampled_accuracy
from reinforce_ada.generation.prompting import encode_prompt
from reinforce_ada.progress import progress_bar
from reinforce_ada.runs.checkpoint import add_final_evaluation, jsonable, save_checkpoint, write_checkpoint
from reinforce_ada.runs.files import write_atomic
from reinforce_ada.runs.folder import record_event
from reinforce_ada.runs.inputs import input_files, prompts_fingerprint, weights_fingerprint
from reinforce_ada.runs.lock import RunLock
from reinforce_ada.runs.resume import decide_start
from reinforce_ada.sampling.factory import build_sampler
from reinforce_ada.sampling.memory import prompt_key
from reinforce_ada.sampling.protocols import FatalGenerationError, GenerationError
from reinforce_ada.training.guards import (GenerationStopped, RunInterrupted, RunStopped, check_finite,
                                           check_prompt_lengths, check_verifier_failures, watch_verifier)
from reinforce_ada.training.metrics import MetricsWriter
from reinforce_ada.training.preflight import check_memory_seed, check_step_budget, check_train_inputs
from reinforce_ada.training.setup import (apply_optimizer_settings, check_report_to, load_data, load_model,
                                          make_generator, make_optimizer, reference_model, resolve_device,
                                          seed_everything, trainer_generator, wrap_lora)
from reinforce_ada.training.held_out import HELD_OUT_FILE, evaluation_metrics, fix_strata, held_out_record
from reinforce_ada.training.update import PolicyUpdate, evaluation_mismatch, sequences, token_entropy
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
        self.config = cfg = config
        check_report_to(cfg.report_to)
        builds_data = train_prompts is None or verifier is None or eval_prompts is None
        # before any folder, and before torch's seconds of import; the built-in task, built once here, serves the data
        # and the warm start
        task = check_train_inputs(cfg, model=model is None, data=builds_data, verifier=builds_data,
                                  generator=generator is None)
        self.device = resolve_device(cfg.device)  # before anything loads: a missing GPU fails at once
        import torch

        if cfg.num_threads:
            torch.set_num_threads(cfg.num_threads)
        elif model_kind(cfg.model) == "tiny":
            torch.set_num_threads(1)  # the tiny model's matmuls are too small to gain from more threads
        self.output_dir = Path(cfg.output_dir)
        # One writer per run folder, for the run's life (released by train() and close()); a failed start releases
        # it and leaves no folder it created.
        self._lock = RunLock(self.output_dir)
        try:
            self._build(task, model, tokenizer, train_prompts, eval_prompts, verifier, generator)
        except BaseException:
            self._lock.release(remove_if_unused=True)
            raise

    def _build(self, task: Any, model: Any, tokenizer: Any, train_prompts: Sequence[Prompt] | None,
               eval_prompts: Sequence[Prompt] | None, verifier: Any, generator: Any) -> None:
        cfg = self.config
        # Refuse a folder holding another run, validate the checkpoint to resume from; nothing is created yet.
        self.start = start = decide_start(cfg)
        seed_everything(cfg.seed)
        if train_prompts is None or verifier is None or eval_prompts is None:
            task_train, task_eval, task_verifier = load_data(cfg, task)
            train_prompts = task_train if train_prompts is None else train_prompts
            eval_prompts = task_eval if eval_prompts is None else eval_prompts
            verifier = task_verifier if verifier is None else verifier
        self.eval_prompts = list(eval_prompts or [])
        check_step_budget(cfg, len(train_prompts))  # a step's budget fits the prompts a step draws
        check_memory_seed(cfg, train_prompts)  # every row, and whether it seeds any training prompt
        self.stream = PromptStream(train_prompts, cfg.seed)
        # every input the run reads, fingerprinted; checked against the checkpoint's before anything is rewritten
        self.inputs = {"data": prompts_fingerprint(self.stream.prompts),
                       "held_out": prompts_fingerprint(self.eval_prompts), **input_files(cfg)}
        start.check_inputs(cfg, self.inputs)
        self.verifier = watch_verifier(verifier, cfg, self.stream.prompts)  # + signature check and timeout

        warm_start: dict[str, Any] = {}
        if model is None:
            model, tokenizer, warm_start = load_model(cfg, train_prompts, task, self.eval_prompts)
        elif tokenizer is None:
            raise ValueError("a model was given without its tokenizer")
        self.inputs["model"] = weights_fingerprint(model)  # the start model, before anything replaces its weights
        start.check_inputs(cfg, {"model": self.inputs["model"]})
        if cfg.lora:
            model = wrap_lora(cfg, model)
        # The KL term's reference is the start model: copied before a resume loads the checkpoint's weights (a
        # copy of the resumed weights would anchor the KL to the checkpoint, not to where the run started).
        ref_model = reference_model(cfg, model) if cfg.kl_coef > 0 else None
        start.load_weights(model, cfg.lora)
        self.model, self.tokenizer = model, tokenizer
        self._prompt_ids: dict[Any, list[int]] = {}
        check_prompt_lengths(cfg, model, self.stream.prompts, self.eval_prompts,
                             lambda p: encode_prompt(tokenizer, p, cfg.use_chat_template))  # not cached: memory
        if next(model.parameters()).device != self.device:
            model.to(self.device)
            if ref_model is not None:
                ref_model.to(self.device)

        self._generator = trainer_generator(generator) if generator is not None else make_generator(cfg, model,
                                                                                                     tokenizer)
        self._weights_version = 0  # counts the updates of the model's weights
        self._synced_version: int | None = None  # the version the generator holds (None: not synced yet)
        self.eval_metrics: dict[str, float] = {}  # the last evaluation's eval/* metrics
        self.sampler = build_sampler(cfg.sampler_config(), self._generator, self.verifier)
        self.update = PolicyUpdate(model, *make_optimizer(cfg, model), cfg, self.device, ref_model)
        start.restore(self.update.optimizer, self.update.scheduler, self.stream, self.sampler, cfg,
                      evaluates=bool(self.eval_prompts))
        apply_optimizer_settings(cfg, self.update.optimizer, self.update.scheduler)  # the config's, not the checkpoint's
        self.step = start.step
        self.totals = start.totals
        self.accuracy_before = start.accuracy_before
        self.accuracy_history = start.accuracy_history
        self.warm_start_info = start.warm_start if start.warm_start is not None else warm_start
        # the difficulty strata, fixed before the first evaluation of a fresh run; a resumed run keeps its own
        self.strata = Strata.from_json(start.strata, f"{start.checkpoint}") if start.strata else None
        self._uncounted: dict[str, int] = {}  # verifier counts of the strata's samples, kept out of verifier/*
        self.nothing_to_do = start.nothing_to_do  # a finished run resumed with no more steps changes nothing
        self._evaluating: str | None = None  # the evaluation running now, if any (an interrupt names it)

    # -- training ---------------------------------------------------------------------------------------------------
    def train(self) -> dict[str, Any]:
        """Train ``max_steps`` steps; returns the run summary. A run that cannot learn raises
        :class:`~reinforce_ada.training.guards.RunStopped`, after recording why in ``config_history.jsonl``; so does a
        generator that cannot serve another request (:class:`~reinforce_ada.sampling.protocols.FatalGenerationError`,
        e.g. a dead vLLM engine), which the CLI then ends with exit 3 and the one-line cause."""
        try:
            if self.nothing_to_do is not None:  # a finished run resumed with no more steps: nothing is written
                logger.info("%s", self.nothing_to_do)  # the caller says it (the command line prints it)
                return json.loads((self.output_dir / "summary.json").read_text())
            try:
                return self._train()
            except GenerationError as err:  # a dead engine (never retried) or a failure that outlasted its retries
                how = "was not retried" if isinstance(err, FatalGenerationError) else "outlasted its retries"
                raise GenerationStopped(f"step {self.step + 1}: the generator failed for good and {how}: "
                                        f"{' '.join(str(err).split())}") from err
        except RunStopped as err:
            record_event(self.config, {"event": "stopped", "step": self.step, "reason": str(err)})
            raise
        except KeyboardInterrupt as err:  # Ctrl-C, SIGINT, SIGHUP/SIGTERM, a reward function raising it: recorded
            what = err.name if isinstance(err, Signalled) else "KeyboardInterrupt"
            where = self._evaluating or f"step {self.step + 1}"
            record_event(self.config, {"event": "stopped", "step": self.step,
                                       "reason": f"interrupted ({what}) during {where}"})
            raise RunInterrupted(f"{what} during {where}; {self._how_to_go_on()}",
                                 getattr(err, "exit_status", 130), cause=f"{what} during {where}") from err
        finally:
            self._lock.release()

    def _how_to_go_on(self) -> str:
        """How a stopped run continues: from its newest checkpoint, or (none written yet) from the start."""
        from reinforce_ada.runs.intact import latest_checkpoint

        checkpoint = latest_checkpoint(self.output_dir)
        if checkpoint is not None:
            return f"--resume continues it from {checkpoint.name}"
        if self.step == 0:  # a run stopped before its first step blocks nothing (runs.folder.stopped_before_first_step)
            return "no checkpoint was written yet, so there is nothing to resume: the same command starts it over"
        return ("no checkpoint was written yet, so there is nothing to resume: the same command with --overwrite "
                "starts it over")

    def _train(self) -> dict[str, Any]:
        cfg = self.config
        self.start.open_folder(cfg)  # the start recorded; metrics.jsonl cut back to the start's step
        writer = MetricsWriter(self.output_dir, cfg.report_to, asdict(cfg))
        # on a terminal only (no carriage-return redraws in a piped log); its label says what the run is doing
        progress = progress_bar(total=cfg.max_steps, initial=self.step, desc="train", unit="step")
        held_out = f"{len(self.eval_prompts)} held-out"
        try:
            if self.step == 0 and self.strata is None and cfg.eval_strata_samples and self.eval_prompts:
                self._evaluating = "the difficulty strata before training"
                progress.set_description(f"strata: {held_out} x {cfg.eval_strata_samples}")
                self.strata = self._fix_strata()
                self._evaluating = None
            if self.strata is not None and not (self.output_dir / STRATA_FILE).exists():
                write_atomic(self.output_dir / STRATA_FILE, json.dumps(self.strata.to_json(), indent=1))
            if self.eval_prompts and self.start.owes_evaluation(cfg):  # step 0's, or one a kill cut short
                progress.set_description(f"eval: {held_out} x {cfg.eval_samples}")
                accuracy = self.evaluate()
                self.accuracy_history.append((self.step, accuracy))
                writer.write({"step": self.step, **self.eval_metrics, "total_samples": self.totals["samples"]})
                if self.step == 0:
                    self.accuracy_before = accuracy
                    logger.info("held-out sampled accuracy before training: %.1f%%", 100 * accuracy)
            progress.set_description("train")
            while self.step < cfg.max_steps:
                metrics = self.train_step()
                if cfg.eval_steps and self.step % cfg.eval_steps == 0 and self.step < cfg.max_steps and \
                        self.eval_prompts:
                    progress.set_description(f"eval: {held_out} x {cfg.eval_samples}")
                    self.accuracy_history.append((self.step, self.evaluate()))
                    metrics.update(self.eval_metrics)
                    progress.set_description("train")
                writer.write(metrics)
                progress.update(1)
                progress.set_postfix(reward=f"{metrics['sampling/reward_mean']:.2f}",
                                     samples=int(metrics["total_samples"]),
                                     rounds=int(metrics["sampling/rounds_used"]),
                                     zero_var=f"{metrics['sampling/zero_variance_fraction']:.2f}")
                if cfg.save_steps and self.step % cfg.save_steps == 0 and self.step < cfg.max_steps:
                    self.save_checkpoint()
            accuracy_after = self.start.evaluated_at(self.step)  # killed after its final evaluation: already there
            if accuracy_after is None:
                # Checkpoint before the final evaluation (evaluation draws from the same RNG as sampling), so a run
                # resumed from here continues exactly as an uninterrupted one would; a checkpoint the run started
                # from at this very step is already on disk and is not rewritten.
                checkpoint = self.start.checkpoint_at(self.step) or self.save_checkpoint()
                if self.eval_prompts:
                    progress.set_description(f"final eval: {held_out} x {cfg.eval_samples}")
                    accuracy_after = self.evaluate()
                    self.accuracy_history.append((self.step, accuracy_after))
                    writer.write({"step": self.step, **self.eval_metrics, "total_samples": self.totals["samples"]})
                    # ... and the evaluation with the RNG state after it, for a run that extends this one
                    add_final_evaluation(checkpoint, accuracy_after, self._verifier_counters())
        finally:
            progress.close()
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
        self._sync_generator()  # the engine samples from the weights just trained
        weights_pushed = time.perf_counter()
        # ada-budget with budget_overdraw: more candidates than the budget trains on; the skipped ones are consumed
        # from this epoch's order like the others and come back in the next epoch. DAPO draws as it goes.
        batch = self.sampler.sample(self.sampler.draw(self.stream, cfg.prompts_per_step))
        sampled = time.perf_counter()
        check_verifier_failures(f"step {self.step + 1}", int(batch.metrics["num_verifier_failures"]),
                                int(batch.metrics["total_samples"]), cfg.max_verifier_failure_rate, self.verifier)
        self._generator.sleep()  # vLLM: release the KV cache during the update; generate() wakes it
        slept = time.perf_counter()
        seqs = sequences(batch, self.tokenizer.pad_token_id, self._prompt_token_ids,
                         f"step {self.step + 1}: the generator ({type(self._generator).__name__})")
        rewards = [abs(c.reward) for g in batch.groups for c in g.completions if c.reward is not None]
        check_finite(self.step + 1, "the advantages", seqs.advantages,
                     f"the largest |reward| is {max(rewards, default=0.0):.3g}; rewards must stay well inside float32")
        if seqs.weights is not None:
            check_finite(self.step + 1, "the importance weights", seqs.weights)
        update_metrics: dict[str, float] = {}
        if seqs.num_sequences:
            update_metrics, optimizer_steps = self.update(seqs, self.step)
            self.totals["optimizer_steps"] += optimizer_steps
            self._weights_version += optimizer_steps > 0
        self.step += 1
        generated_tokens = sum(len(c.token_ids) for p in batch.pools.values() for c in p.completions)
        self.totals["samples"] += int(batch.metrics["total_samples"])
        self.totals["tokens"] += generated_tokens
        elapsed = time.perf_counter() - started
        self.totals["wall_seconds"] += elapsed
        scoring = self.verifier.window_seconds()
        metrics: dict[str, Any] = {"step": self.step}
        metrics.update({f"sampling/{k}": v for k, v in batch.metrics.items()})
        # the update's metrics are train/*, except those named with their own room (mismatch/*)
        metrics.update({(k if "/" in k else f"train/{k}"): v for k, v in update_metrics.items()})
        metrics.update({
            "total_samples": self.totals["samples"],
            "total_tokens": self.totals["tokens"],
            "train/lr": self.update.scheduler.get_last_lr()[0],
            "train/num_sequences": seqs.num_sequences,
            "time/sampling_seconds": sampled - started,
            "time/step_seconds": elapsed,
            # where the step's time went; the four add up to time/step_seconds
            "time/generation_seconds": sampled - weights_pushed - scoring,  # + the sampler's own bookkeeping
            "time/scoring_seconds": scoring,  # inside the verifier
            "time/update_seconds": started + elapsed - slept,  # sequences, old log-probs, PPO-clip update
            "time/sync_seconds": (weights_pushed - started) + (slept - sampled),  # weight push and engine sleep
        })
        if batch.generation_error:
            metrics["sampling/generation_error"] = batch.generation_error
        # Running counters of the reward function (completions scored, timeouts, failures, ...), when it keeps them.
        metrics.update({f"verifier/{k}": v for k, v in self._verifier_counters().items()})
        return metrics

    def _prompt_token_ids(self, prompt: Prompt) -> list[int]:
        ids = self._prompt_ids.get(prompt.prompt_id)
        if ids is None:
            ids = encode_prompt(self.tokenizer, prompt, self.config.use_chat_template)
            self._prompt_ids[prompt.prompt_id] = ids
        return ids

    # -- the generator and the weights it samples from ---------------------------------------------------------------
    @property
    def generator(self) -> Any:
        """The generation backend, holding the weights being trained: an engine with weights of its own (vLLM, a
        server) is synced to the trainer's model first when they changed since its last sync -- so the held-out
        evaluation, ``evaluate``/``estimate_pass_rates`` called with a live trainer's generator, or anything else
        that samples from ``trainer.generator`` sees the current policy."""
        self._sync_generator()
        return self._generator

    def _sync_generator(self) -> None:
        """Push the model's weights into the generator if they changed since it last took them."""
        if self._synced_version != self._weights_version:
            self._generator.load_weights(self.model)
            self._synced_version = self._weights_version

    # -- evaluation -------------------------------------------------------------------------------------------------
    def evaluate(self) -> float:
        """Held-out sampled accuracy: the share of ``eval_samples`` samples per prompt that are positive, sampled
        from the weights being trained (the generator is synced first); its metrics -- with the accuracy per
        difficulty stratum, the pass@k curve and the policy's token entropy on these samples
        (:func:`~reinforce_ada.training.held_out.evaluation_metrics`), and an engine's rollout/trainer mismatch --
        are kept in :attr:`eval_metrics`.

        Stops the run (rather than report a made-up accuracy) when the verifier could not score enough of them, or
        when the engine's log-probabilities show it sampled from other weights (the training steps' check)."""
        where = f"held-out evaluation at step {self.step}"
        outer, self._evaluating = self._evaluating, self._evaluating or f"the {where}"  # an interrupt names it
        accuracy = self._evaluate(where)  # (left set when it raises: train() names it in the stopped event)
        self._evaluating = outer
        return accuracy

    def _evaluate(self, where: str) -> float:
        generator = self.generator  # synced to the current weights
        self.verifier.start_window()
        counts = sampled_accuracy(generator, self.verifier, self.eval_prompts, self.config.eval_samples,
                                  self.config.positive_threshold)
        check_verifier_failures(where, counts.num_verifier_failures, counts.num_samples,
                                self.config.max_verifier_failure_rate, self.verifier)
        rows = [(self._prompt_token_ids(p), c) for p, outputs in zip(self.eval_prompts, counts.outputs)
                for c in outputs]
        mismatch = {}
        if self.config.generator != "hf":  # an engine with weights of its own: it sampled from the model's?
            mismatch = evaluation_mismatch(self.model, rows, self.tokenizer.pad_token_id, self.config, self.device,
                                           where)
        entropy = token_entropy(self.model, rows, self.tokenizer.pad_token_id, self.config.temperature,
                                self.config.micro_batch_size, self.device)
        strata = self.strata.of(self.eval_prompts) if self.strata is not None else None
        self.eval_metrics = {"eval/accuracy": counts.accuracy, **mismatch,
                             **evaluation_metrics(counts, self.config.eval_samples, strata, entropy)}
        keys = [prompt_key(p) for p in self.eval_prompts]
        with (self.output_dir / HELD_OUT_FILE).open("a") as fh:  # per prompt, for compare --lr-selection split
            fh.write(json.dumps(held_out_record(self.step, keys, counts.counts)) + "\n")
        return counts.accuracy

    def _fix_strata(self) -> Strata:
        """Before training: the held-out prompts' difficulty strata under the start model (:func:`fix_strata`:
        drawn apart from training's random streams, their verifier counts kept out of ``verifier/*``), written to
        ``strata.json``."""
        strata, self._uncounted = fix_strata(self.generator, self.verifier, self.eval_prompts, self.config)
        write_atomic(self.output_dir / STRATA_FILE, json.dumps(strata.to_json(), indent=1))
        return strata

    def close(self) -> None:
        """Release the generator (a vLLM engine and the checkpoint folder it was built from) and the run folder;
        the trainer cannot sample afterwards."""
        self._lock.release()
        self._generator.close()

    # -- checkpoints ------------------------------------------------------------------------------------------------
    def save_checkpoint(self) -> Path:
        """Write ``checkpoint-{step}`` atomically (see :func:`reinforce_ada.runs.checkpoint.save_checkpoint`)."""
        return save_checkpoint(self.output_dir, self.step, self._write_checkpoint)

    def _verifier_counters(self) -> dict[str, int]:
        """The verifier's running counters over the whole run (those before this start included)."""
        offset = self.start.verifier_offset
        return {k: v + offset.get(k, 0) - self._uncounted.get(k, 0) for k, v in verifier_stats(self.verifier).items()}

    def _write_checkpoint(self, folder: Path, written: list[Path]) -> None:
        state = {"step": self.step, "totals": self.totals, "accuracy_before": self.accuracy_before,
                 "accuracy_history": self.accuracy_history, "stream": self.stream.state_dict(),
                 "sampler": jsonable(self.sampler.state_dict()), "warm_start": self.warm_start_info,
                 "verifier_stats": self._verifier_counters(), "data": self.inputs["data"],
                 "strata": self.strata.to_json() if self.strata is not None else None,
                 "inputs": {k: v for k, v in self.inputs.items() if k != "data"},
                 "config": asdict(self.config)}
        write_checkpoint(folder, written, self.model, self.tokenizer, self.update.optimizer, self.update.scheduler,
                         state)
