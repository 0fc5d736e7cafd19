"""AdaGRPOTrainer keeps GRPOTrainer's semantics (CPU, tiny local model, TRL's plain generation; ~1 s per run).

* ``scale_rewards`` ("group" / "batch" / "none", and TRL's True / False) is applied to *pool* statistics, checked
  arithmetically on a scripted reward; in a GRPO-equivalent configuration (one round of ``num_generations``) the
  advantages equal the ones TRL computed itself, for every ``scale_rewards`` and ``normalize_then_sum``;
* correctness comes from ``correctness_reward_funcs`` (a format reward does not make completions correct);
* a raising reward function raises; TRL's all-``None`` warning fires; ``log_extra`` / ``log_metric`` taken through
  ``**kwargs`` reach TRL's logs; ``args=None`` builds a default config named as TRL names it;
* TRL's ``num_tokens`` and ``completions/*`` count every generated completion, the kept rows go to ``ada/kept/*``.
"""

from __future__ import annotations

import math
import re
import statistics

import pytest

pytest.importorskip("trl")

import torch  # noqa: E402
from datasets import Dataset  # noqa: E402

from reinforce_ada.config import ConfigError  # noqa: E402
from reinforce_ada.integrations.trl import AdaGRPOConfig, AdaGRPOTrainer  # noqa: E402
from reinforce_ada.integrations.trl.generation import PROMPT_IDS_KEY  # noqa: E402
from reinforce_ada.models import build_char_tokenizer, build_tiny_model  # noqa: E402

N, M = 2, 2
EPS = 1e-4  # TRL's constant (AdaGRPOConfig.advantage_epsilon's default)
PROMPTS = ["1+1=", "2+2=", "3+3=", "4+4="]


def first_char_reward(prompts, completions, **kwargs):
    """Real-valued and deterministic in the completion text: (code of the first character mod 3) / 2."""
    return [(ord(c[0]) % 3) / 2 if c else 0.0 for c in completions]


def length_reward(prompts, completions, **kwargs):
    return [len(set(c)) / 8 for c in completions]


def make_args(tmp_path, **overrides):
    params = dict(output_dir=str(tmp_path / "run"), use_cpu=True, report_to=[], bf16=False, save_strategy="no",
                  per_device_train_batch_size=len(PROMPTS) * N, num_generations=N, samples_per_round=M, max_rounds=4,
                  exit_rule="balanced", max_completion_length=8, max_steps=1, logging_steps=1, learning_rate=1e-2,
                  seed=0)
    params.update(overrides)
    return AdaGRPOConfig(**params)


class Recording(AdaGRPOTrainer):
    """Keeps TRL's own advantages (computed on the kept rows, then replaced) and what the loss trained on."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.trl_advantages: list[float] = []
        self.loss_advantages: list[float] = []

    def _replace_logged_advantages(self, advantages):
        self.trl_advantages = list(self._logs["advantages"])[-len(advantages):]
        super()._replace_logged_advantages(advantages)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        self.loss_advantages.extend(inputs["advantages"].tolist())
        return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)


def train(tmp_path, reward_funcs=first_char_reward, trainer_cls=Recording, **overrides):
    dataset = Dataset.from_dict({"prompt": PROMPTS, "answer": ["2", "4", "6", "8"]})
    trainer = trainer_cls(model=build_tiny_model(), reward_funcs=reward_funcs, args=make_args(tmp_path, **overrides),
                          train_dataset=dataset, processing_class=build_char_tokenizer())
    trainer.train()
    return trainer


def train_log(trainer) -> dict:
    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert len(logs) == 1
    return logs[0]


# -- scale_rewards on pool statistics ---------------------------------------------------------------------------------
@pytest.mark.parametrize("scale_rewards, meaning", [("group", "pool"), ("batch", "batch"), ("none", "none"),
                                                    (True, "pool"), (False, "none")])
def test_scale_rewards_divides_by_pool_or_batch_std(tmp_path, scale_rewards, meaning):
    trainer = train(tmp_path, scale_rewards=scale_rewards)
    batch = trainer.ada_last_batch
    pools = {g.prompt_id: first_char_reward(None, [c.text for c in batch.pools[g.prompt_id].completions])
             for g in batch.groups}
    every_reward = [r for rewards in pools.values() for r in rewards]
    batch_std = statistics.stdev(every_reward)
    expected = []
    for group in batch.groups:
        pool = pools[group.prompt_id]
        pool_mean, pool_std = statistics.mean(pool), statistics.stdev(pool)
        for r in first_char_reward(None, [c.text for c in group.completions]):
            if meaning == "pool":
                expected.append(0.0 if pool_std == 0 else (r - pool_mean) / (pool_std + EPS))
            elif meaning == "batch":
                expected.append((r - pool_mean) / (batch_std + EPS))
            else:
                expected.append(r - pool_mean)
    assert trainer.ada_advantages.tolist() == pytest.approx(expected, abs=1e-5)
    # ... and they are what TRL's loss trained on (it shuffles rows: compare as multisets).
    assert sorted(trainer.loss_advantages) == pytest.approx(sorted(expected), abs=1e-5)
    # Not vacuous: some pool was larger than its group, and the pool and batch stds differ from the group's.
    assert any(len(pools[g.prompt_id]) > N for g in batch.groups)
    group_stds = [statistics.stdev(first_char_reward(None, [c.text for c in g.completions])) for g in batch.groups]
    pool_stds = [statistics.stdev(pools[g.prompt_id]) for g in batch.groups]
    assert any(abs(a - b) > 1e-3 for a, b in zip(group_stds, pool_stds))
    assert any(abs(batch_std - s) > 1e-3 for s in pool_stds)


@pytest.mark.parametrize("aggregation, scale_rewards", [("sum_then_normalize", "group"),
                                                        ("sum_then_normalize", "batch"),
                                                        ("sum_then_normalize", "none"),
                                                        ("normalize_then_sum", "group")])
def test_grpo_equivalent_configuration_gives_trls_own_advantages(tmp_path, aggregation, scale_rewards):
    # One round of num_generations samples: pool = group, so the advantages must be exactly TRL's.
    trainer = train(tmp_path, reward_funcs=[first_char_reward, length_reward], reward_weights=[1.0, 0.5],
                    correctness_reward_funcs=["first_char_reward"], max_rounds=1, samples_per_round=N,
                    multi_objective_aggregation=aggregation, scale_rewards=scale_rewards)
    assert len(trainer.trl_advantages) == len(PROMPTS) * N
    assert trainer.ada_advantages.tolist() == pytest.approx(trainer.trl_advantages, abs=1e-5)
    assert any(abs(a) > 1e-3 for a in trainer.trl_advantages)  # not all zero
    assert train_log(trainer)["ada/samples_per_prompt"] == N


# -- correctness ------------------------------------------------------------------------------------------------------
def format_reward(prompts, completions, **kwargs):
    return [1.0] * len(completions)  # every completion is "well formatted"


def accuracy(prompts, completions, answer, **kwargs):
    return [float(c.strip() == a) for c, a in zip(completions, answer)]  # the untrained model is never right


def test_several_reward_functions_need_correctness_reward_funcs(tmp_path):
    dataset = Dataset.from_dict({"prompt": PROMPTS, "answer": ["2", "4", "6", "8"]})
    with pytest.raises(ConfigError, match=r"there are 2 reward functions \(\['format_reward', 'accuracy'\]\); set "
                                          r"correctness_reward_funcs .*\(correctness_reward_funcs=\[name, "
                                          r"\.\.\.\], the names as listed\)"):
        AdaGRPOTrainer(model=build_tiny_model(), reward_funcs=[format_reward, accuracy], args=make_args(tmp_path),
                       train_dataset=dataset, processing_class=build_char_tokenizer())
    with pytest.raises(ConfigError, match="'acc' is not a reward function name"):
        AdaGRPOTrainer(model=build_tiny_model(), reward_funcs=[format_reward, accuracy],
                       args=make_args(tmp_path, correctness_reward_funcs=["acc"]), train_dataset=dataset,
                       processing_class=build_char_tokenizer())


@pytest.mark.parametrize("correctness", [["accuracy"], [1]])
def test_format_reward_gives_no_exits_when_nothing_is_correct(tmp_path, correctness):
    trainer = train(tmp_path, reward_funcs=[format_reward, accuracy], correctness_reward_funcs=correctness,
                    exit_rule="positive", max_rounds=3)
    assert trainer.ada_correctness == [1]
    log = train_log(trainer)
    assert log["ada/exited_fraction"] == 0.0 and log["ada/positive_fraction"] == 0.0
    assert log["ada/samples_per_prompt"] == M * 3  # every prompt sampled all rounds
    assert log["rewards/accuracy/mean"] == 0.0 and log["rewards/format_reward/mean"] == 1.0


def test_a_step_with_every_completion_correct_warns(tmp_path):
    with pytest.warns(UserWarning, match=r"every completion of this step counts as correct \(\['format_reward'\]"):
        trainer = train(tmp_path, reward_funcs=[format_reward, accuracy], correctness_reward_funcs=["format_reward"],
                        exit_rule="positive")
    assert train_log(trainer)["ada/exited_fraction"] == 1.0


# -- reward functions: errors, None, logging -------------------------------------------------------------------------
def test_a_raising_reward_function_raises(tmp_path):
    calls = []

    def broken(prompts, completions, **kwargs):
        calls.append(len(completions))
        raise ValueError("boom: the grader is down")

    with pytest.raises(ValueError, match="boom: the grader is down"):
        train(tmp_path, reward_funcs=broken)
    assert calls == [len(PROMPTS) * M]  # the first call raised; nothing was retried or scored 0

    def one_short(prompts, completions, **kwargs):
        return [0.0] * (len(completions) - 1)

    with pytest.raises(ValueError, match="'one_short' returned 7 rewards, but 8 were expected"):
        train(tmp_path, reward_funcs=one_short)


@pytest.mark.parametrize("result, cause", [
    (lambda n: {i: 1.0 for i in range(n)}, "returned a dict"),
    (lambda n: (1.0 for _ in range(n)), "returned a generator"),
    (lambda n: "1" * n, "returned a str"),
    (lambda n: ["1"] * n, "returned reward='1' (a str)"),
])
def test_a_reward_function_result_that_is_not_a_list_of_numbers_raises(tmp_path, result, cause):
    def odd(prompts, completions, **kwargs):
        return result(len(completions))

    with pytest.raises(ValueError, match=re.escape(f"reward function 'odd' {cause}")):
        train(tmp_path, reward_funcs=odd)


def test_all_rewards_none_logs_trls_warning(tmp_path, caplog):
    def always_none(completions, **kwargs):
        return [None] * len(completions)

    with caplog.at_level("WARNING", logger="trl.trainer.grpo_trainer"):
        trainer = train(tmp_path, reward_funcs=always_none)
    assert "All reward functions returned None for the following kwargs:" in caplog.text
    log = train_log(trainer)
    assert log["ada/verifier_failures"] == log["ada/samples_per_prompt"] * len(PROMPTS)
    assert trainer.ada_advantages.abs().max().item() == 0.0  # unscorable rows carry no signal, as in TRL


def test_reward_functions_log_extra_and_metric_through_kwargs(tmp_path):
    def reward_func(completions, **kwargs):
        kwargs["log_extra"]("test_column", [c[:5] for c in completions])
        kwargs["log_metric"]("custom_accuracy", 0.75)
        return [float(len(c)) for c in completions]

    trainer = train(tmp_path, reward_funcs=reward_func, log_completions=True)
    logs = trainer._logs
    assert list(logs["extra"]["test_column"]) == [c[:5] for c in logs["completion"]]
    assert len(logs["completion"]) == len(PROMPTS) * N
    assert train_log(trainer)["custom_accuracy"] == pytest.approx(0.75)


def test_args_none_builds_a_default_config_like_trl(tmp_path, monkeypatch):
    import trl.trainer.grpo_trainer as trl_module
    from trl import GRPOConfig, GRPOTrainer

    import reinforce_ada.integrations.trl.trainer as ada_module

    # Both build their default config from the model's name. The defaults ask for bf16, which this CPU lacks, so
    # each config class is swapped for one that only adds use_cpu (the same for both).
    class CPUConfig(GRPOConfig):
        def __init__(self, output_dir):
            super().__init__(output_dir=output_dir, use_cpu=True, bf16=False, report_to=[])

    class AdaCPUConfig(AdaGRPOConfig):
        def __init__(self, output_dir):
            super().__init__(output_dir=output_dir, use_cpu=True, bf16=False, report_to=[])

    monkeypatch.setattr(trl_module, "GRPOConfig", CPUConfig)
    monkeypatch.setattr(ada_module, "AdaGRPOConfig", AdaCPUConfig)
    monkeypatch.chdir(tmp_path)
    dataset = Dataset.from_dict({"prompt": PROMPTS * 2})
    models = [build_tiny_model(), build_tiny_model()]
    for model in models:
        model.config._name_or_path = "local/tiny-qwen2"
    ada = AdaGRPOTrainer(model=models[0], reward_funcs=first_char_reward, train_dataset=dataset,
                         processing_class=build_char_tokenizer())
    plain = GRPOTrainer(model=models[1], reward_funcs=first_char_reward, train_dataset=dataset,
                        processing_class=build_char_tokenizer())
    assert isinstance(ada.args, AdaGRPOConfig)
    assert ada.args.output_dir == plain.args.output_dir == "tiny-qwen2-GRPO"
    assert (ada.args.num_generations, ada.args.scale_rewards) == (plain.args.num_generations, plain.args.scale_rewards)


# -- token and completion metrics count the whole pool ----------------------------------------------------------------
def test_token_metrics_count_every_generated_completion(tmp_path):
    trainer = train(tmp_path, scale_rewards="none")
    batch = trainer.ada_last_batch
    prompt_len = {g.prompt_id: len(g.prompt.metadata[PROMPT_IDS_KEY]) for g in batch.groups}
    drawn = [c for p in batch.pools.values() for c in p.completions]
    kept = [c for g in batch.groups for c in g.completions]
    assert len(drawn) > len(kept)  # not vacuous: sampling went past one round somewhere
    log = train_log(trainer)
    assert log["num_tokens"] == sum(prompt_len[c.prompt_id] + len(c.token_ids) for c in drawn)
    assert trainer.state.num_input_tokens_seen == log["num_tokens"]
    assert log["ada/kept/num_tokens"] == sum(prompt_len[c.prompt_id] + len(c.token_ids) for c in kept)
    pool_lengths, kept_lengths = [len(c.token_ids) for c in drawn], [len(c.token_ids) for c in kept]
    assert log["completions/mean_length"] == pytest.approx(statistics.mean(pool_lengths))
    assert log["completions/max_length"] == max(pool_lengths) and log["completions/min_length"] == min(pool_lengths)
    assert log["ada/kept/completions/mean_length"] == pytest.approx(statistics.mean(kept_lengths))
    eos = trainer.processing_class.eos_token_id
    clipped = [c.token_ids[-1] != eos for c in drawn]
    assert log["completions/clipped_ratio"] == pytest.approx(sum(clipped) / len(drawn))
    assert math.isfinite(log["ada/kept/completions/clipped_ratio"])


def test_kept_token_count_survives_a_checkpoint(tmp_path):
    trainer = train(tmp_path, save_strategy="steps", save_steps=1)
    seen = trainer.ada_kept_tokens_seen
    assert seen > 0
    trainer.ada_kept_tokens_seen = 0
    trainer._load_rng_state(str(tmp_path / "run" / "checkpoint-1"))
    assert trainer.ada_kept_tokens_seen == seen
    assert torch.is_tensor(trainer.ada_advantages)
