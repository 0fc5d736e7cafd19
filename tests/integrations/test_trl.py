"""AdaGRPOTrainer end to end on a tiny local model with TRL's plain generation (CPU, a few seconds), plus the adapters.

One 2-step training run (module fixture, ``scale_rewards="none"``) backs several tests: parameters change, TRL's logs
carry our sampling metrics, and the advantages TRL trains on (captured in ``compute_loss``) are exactly
``r - mean(pool)``, recomputed here from the scripted reward and the texts of every completion drawn for the prompt.
TRL's other semantics (``scale_rewards``, correctness, logging, errors, token metrics) are in test_trl_semantics.py.
"""

from __future__ import annotations

import math
import sys
from types import SimpleNamespace

import pytest

pytest.importorskip("trl")

import torch  # noqa: E402
from datasets import Dataset  # noqa: E402

from reinforce_ada.config import ConfigError  # noqa: E402
from reinforce_ada.integrations.trl import AdaGRPOConfig, AdaGRPOTrainer, TRLRewardVerifier  # noqa: E402
from reinforce_ada.integrations.trl._version import check_trl_version  # noqa: E402
from reinforce_ada.models import build_char_tokenizer, build_tiny_model  # noqa: E402
from reinforce_ada.types import Completion, Prompt  # noqa: E402

N, M, MAX_ROUNDS = 2, 2, 4


def scripted_reward(prompts, completions, **kwargs):
    """Real-valued and deterministic in the completion text: (code of the first character mod 3) / 2 in {0, .5, 1}."""
    return [(ord(c[0]) % 3) / 2 if c else 0.0 for c in completions]


def base_args(tmp_path, **overrides):
    params = dict(output_dir=str(tmp_path / "run"), use_cpu=True, report_to=[], bf16=False, save_strategy="no",
                  per_device_train_batch_size=8, num_generations=N, samples_per_round=M, max_rounds=MAX_ROUNDS,
                  exit_rule="balanced", positive_threshold=0.5, max_completion_length=8, max_steps=2,
                  logging_steps=1, learning_rate=1e-2, seed=0)
    params.update(overrides)
    return AdaGRPOConfig(**params)


class RecordingTrainer(AdaGRPOTrainer):
    """Captures what TRL's loss sees, and the sampler's batch of every training generation."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.loss_inputs: list[dict] = []
        self.batches: list = []
        self.logged_advantages: list[list[float]] = []
        self.trained_advantages: list[list[float]] = []

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        if self.model.training:
            self.batches.append(self.ada_last_batch)
            self.logged_advantages.append(list(self._logs["advantages"]))
            self.trained_advantages.append(self.ada_advantages.tolist())
        return output

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        if model.training:
            self.loss_inputs.append({k: inputs[k].detach().cpu().clone() for k in
                                     ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "advantages",
                                      "sampling_per_token_logps", "old_per_token_logps", "importance_sampling_ratio")
                                     if k in inputs})
        return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("trl")
    model, tokenizer = build_tiny_model(), build_char_tokenizer()
    dataset = Dataset.from_dict({"prompt": ["1+1=", "2+2=", "3+3=", "4+4=", "5+5=", "6+6=", "7+7=", "8+8="],
                                 "answer": ["2", "4", "6", "8", "10", "12", "14", "16"]})
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    args = base_args(tmp_path, eval_strategy="steps", eval_steps=2, per_device_eval_batch_size=4, scale_rewards="none")
    trainer = RecordingTrainer(model=model, reward_funcs=scripted_reward, args=args, train_dataset=dataset,
                               eval_dataset=dataset.select(range(2)), processing_class=tokenizer)
    trainer.train()
    return SimpleNamespace(trainer=trainer, tokenizer=tokenizer, before=before)


def test_two_steps_train_and_change_parameters(run):
    assert run.trainer.state.global_step == 2
    after = dict(run.trainer.model.named_parameters())
    changed = [k for k, v in run.before.items() if not torch.equal(v, after[k].detach())]
    assert changed, "no parameter changed after two training steps"


def test_logs_include_sampling_metrics(run):
    logs = [h for h in run.trainer.state.log_history if "loss" in h]
    assert len(logs) == 2 and len(run.trainer.batches) == 2
    for log, batch in zip(logs, run.trainer.batches):
        pools = list(batch.pools.values())
        assert log["ada/samples_per_prompt"] == pytest.approx(sum(p.num_drawn for p in pools) / len(pools))
        assert log["ada/rounds"] == len(batch.rounds)
        zero_variance = sum(1 for g in batch.groups if len(set(g.rewards)) == 1) / len(batch.groups)
        assert log["ada/zero_variance_fraction"] == pytest.approx(zero_variance)
        assert 1 <= log["ada/rounds"] <= MAX_ROUNDS
        assert M <= log["ada/samples_per_prompt"] <= M * MAX_ROUNDS
        assert "reward" in log and "entropy" in log  # TRL's own metrics are still there


def test_trained_advantages_are_reward_minus_pool_mean(run):
    tokenizer = run.tokenizer
    assert len(run.trainer.loss_inputs) == 2
    num_checked = 0
    for inputs, batch in zip(run.trainer.loss_inputs, run.trainer.batches):
        groups = {g.prompt.prompt: g for g in batch.groups}
        for row in range(inputs["advantages"].shape[0]):
            prompt = tokenizer.decode(inputs["prompt_ids"][row][inputs["prompt_mask"][row].bool()])
            completion = tokenizer.decode(inputs["completion_ids"][row][inputs["completion_mask"][row].bool()],
                                          skip_special_tokens=True)
            pool = batch.pools[groups[prompt].prompt_id].completions
            pool_rewards = scripted_reward(None, [c.text for c in pool])
            expected = scripted_reward(None, [completion])[0] - sum(pool_rewards) / len(pool_rewards)
            assert inputs["advantages"][row].item() == pytest.approx(expected, abs=1e-6)
            num_checked += 1
    assert num_checked == 2 * 8
    # The check is not vacuous: some prompt was sampled beyond one round and its pool mean differs from its group's.
    groups = [g for b in run.trainer.batches for g in b.groups]
    assert any(g.pool_count > N for g in groups)
    assert any(abs(g.pool_mean - sum(g.rewards) / N) > 1e-9 for g in groups)


def test_seq_explicit_weight_multiplies_the_pool_advantage(tmp_path):
    """objective='log' on the round-based sampler (v3 Sec. 3.2): TRL's pool advantage times min(1 / (p + eps), 8),
    p the pool's pass rate (the share of its rewards above positive_threshold 0.5; the rewards are 0, 0.5 or 1, so it
    is not the mean reward)."""
    dataset = Dataset.from_dict({"prompt": ["1+1=", "2+2=", "3+3=", "4+4="], "answer": ["2", "4", "6", "8"]})
    args = base_args(tmp_path, max_steps=1, per_device_train_batch_size=8, scale_rewards="none", objective="log")
    trainer = RecordingTrainer(model=build_tiny_model(), reward_funcs=scripted_reward, args=args,
                               train_dataset=dataset, processing_class=build_char_tokenizer())
    trainer.train()
    batch, expected = trainer.batches[0], []
    for group in batch.groups:
        pool = scripted_reward(None, [c.text for c in batch.pools[group.prompt_id].completions])
        rbar, pass_rate = sum(pool) / len(pool), sum(r > 0.5 for r in pool) / len(pool)
        expected += [(r - rbar) * min(1 / (pass_rate + 1e-6), 8.0) for r in scripted_reward(None, [c.text for c in
                                                                                               group.completions])]
    assert trainer.trained_advantages[0] == pytest.approx(expected, abs=1e-5)
    # not vacuous: some group with signal has a pool pass rate in (0, 1) different from its mean reward
    assert any(0 < g.pool_num_positive < g.pool_count and g.pool_num_positive / g.pool_count != g.pool_mean
               and len(set(g.rewards)) > 1 for g in batch.groups)


def test_evaluation_is_trl_plain_generation(run):
    # Evaluation ran after step 2 with TRL's one-completion-per-row generation: the sampler ran only for training.
    evals = [h for h in run.trainer.state.log_history if "eval_reward" in h]
    assert len(evals) == 1 and evals[0]["step"] == 2
    assert len(run.trainer.ada_history) == 2 and len(run.trainer.batches) == 2


def test_completion_table_logs_trained_advantages(run):
    for logged, trained in zip(run.trainer.logged_advantages, run.trainer.trained_advantages):
        assert logged[-8:] == pytest.approx(trained, abs=1e-6)


def test_each_completion_is_scored_once(run):
    # The module run's reward function was called by the sampler only: TRL took the kept rewards from it.
    assert run.trainer.ada_reward_calls_reused == 2 and not run.trainer.ada_rescore_kept
    logs = [h for h in run.trainer.state.log_history if "loss" in h]
    for log, batch in zip(logs, run.trainer.batches):  # TRL's reward metric is still the kept completions' mean
        kept = [r for g in batch.groups for r in g.rewards]
        assert log["reward"] == pytest.approx(sum(kept) / len(kept), abs=1e-6)


@pytest.mark.parametrize("rescore_kept", [False, True])
def test_rescoring_only_when_asked(tmp_path, rescore_kept):
    calls = []

    def logging_reward(prompts, completions, log_extra=None, **kwargs):
        calls.append(len(completions))
        log_extra("first_char", [c[:1] for c in completions])
        return scripted_reward(prompts, completions)

    dataset = Dataset.from_dict({"prompt": ["1+1=", "2+2=", "3+3=", "4+4="], "answer": ["2", "4", "6", "8"]})
    trainer = AdaGRPOTrainer(model=build_tiny_model(), reward_funcs=logging_reward,
                             args=base_args(tmp_path, max_steps=1, per_device_train_batch_size=4,
                                            rescore_kept=rescore_kept, log_completions=True),
                             train_dataset=dataset, processing_class=build_char_tokenizer())
    assert trainer.ada_rescore_kept == rescore_kept
    trainer.train()
    drawn = sum(p.num_drawn for p in trainer.ada_last_batch.pools.values())
    kept_rows = 4
    assert sum(calls) == drawn + (kept_rows if rescore_kept else 0)
    # Either way TRL's completions table gets one first_char per kept row, lined up with its completions.
    logs = trainer._logs
    assert list(logs["extra"]["first_char"]) == [c[:1] for c in logs["completion"]]
    assert trainer.ada_reward_calls_reused == (0 if rescore_kept else 1)


def test_checkpoints_carry_the_sampler_rng(tmp_path):
    dataset = Dataset.from_dict({"prompt": ["1+1=", "2+2=", "3+3=", "4+4="], "answer": ["2", "4", "6", "8"]})
    args = base_args(tmp_path, max_steps=1, per_device_train_batch_size=4, save_strategy="steps", save_steps=1)
    trainer = AdaGRPOTrainer(model=build_tiny_model(), reward_funcs=scripted_reward, args=args,
                             train_dataset=dataset, processing_class=build_char_tokenizer())
    trainer.train()
    checkpoint = tmp_path / "run" / "checkpoint-1"
    saved = trainer.ada_sampler.state_dict()
    assert (checkpoint / "ada_sampler_state_0.json").is_file()
    trainer.ada_sampler.rng.random(5)  # move on; loading the checkpoint brings the saved state back
    assert trainer.ada_sampler.state_dict() != saved
    trainer._load_rng_state(str(checkpoint))
    assert trainer.ada_sampler.state_dict() == saved


# -- configuration errors, before any model work -----------------------------------------------------------------------
@pytest.mark.parametrize("overrides, message", [
    (dict(num_generations=8, samples_per_round=2, max_rounds=2), r"^num_generations=8 exceeds samples_per_round \*"),
    (dict(advantage_epsilon=-1.0), r"^advantage_epsilon must be a finite number >= 0"),
    (dict(exit_rule="sometimes"), "exit_rule='sometimes'"),
    (dict(multi_objective_aggregation="sum_of_both"), "multi_objective_aggregation='sum_of_both'"),
    (dict(scale_rewards="sometimes"), "scale_rewards='sometimes'"),
    (dict(correctness_reward_funcs=[]), "correctness_reward_funcs is empty"),
])
def test_bad_config_is_rejected(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message):
        base_args(tmp_path, **overrides)


def test_each_process_must_hold_whole_groups(tmp_path, monkeypatch):
    # Two processes x 3 rows = 6 rows globally (TRL accepts: divisible by n=2), but 3 rows per process are not whole
    # groups of 2, and every process samples whole prompts.
    monkeypatch.setattr(AdaGRPOConfig, "world_size", property(lambda self: 2))
    with pytest.raises(ConfigError, match=r"3 \* 1 = 3 must be a multiple of num_generations=2"):
        base_args(tmp_path, per_device_train_batch_size=3, num_generations=2)


def test_sampler_config_follows_trl_fields(tmp_path):
    args = base_args(tmp_path, num_generations=4, samples_per_round=8, max_rounds=3, per_device_train_batch_size=4)
    cfg = args.sampler_config(process_index=1)
    assert (cfg.group_size, cfg.samples_per_round, cfg.max_rounds) == (4, 8, 3)
    assert cfg.advantage == "pool" and cfg.seed == args.seed + 1
    # TRL's default scale_rewards="group" and its True/False spellings
    assert args.scale_rewards == "group" and cfg.normalize_std
    assert base_args(tmp_path, scale_rewards=False).scale_rewards == "none"
    assert base_args(tmp_path, scale_rewards=True).scale_rewards == "group"
    # Fixed shapes for TRL: every prompt yields a full group.
    assert cfg.unexited == "keep" and cfg.on_verifier_failure == "zero"


def test_trainer_rejects_plain_grpo_config_and_rollout_func(tmp_path):
    from trl import GRPOConfig

    plain = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to=[], num_generations=2,
                       per_device_train_batch_size=2)
    with pytest.raises(TypeError, match="AdaGRPOConfig"):
        AdaGRPOTrainer(model=build_tiny_model(), reward_funcs=scripted_reward, args=plain)
    with pytest.raises(NotImplementedError, match="image prompts"):
        AdaGRPOTrainer(model=build_tiny_model(), reward_funcs=scripted_reward, args=base_args(tmp_path),
                       train_dataset=Dataset.from_dict({"prompt": ["1+1="], "image": [None]}))
    with pytest.raises(ValueError, match="rollout_func"):
        AdaGRPOTrainer(model=build_tiny_model(), reward_funcs=scripted_reward, args=base_args(tmp_path),
                       rollout_func=lambda prompts, trainer: {})


# -- the TRL versions ---------------------------------------------------------------------------------------------------
def test_version_check():
    from trl import GRPOTrainer

    for good in ("1.14.1", "1.15.0", "1.16.0", "1.16.2.dev0"):
        assert check_trl_version(good) == good
    for bad in ("1.14.0", "1.13.0", "0.29.1"):
        with pytest.raises(ImportError, match=r"supports trl>=1.14.1,<1.17 but trl " + bad.replace(".", r"\.")):
            check_trl_version(bad)
    # Newer than tested: a warning when every hook is there ...
    with pytest.warns(UserWarning, match=r"trl 1\.17\.0 has every hook it uses"):
        assert check_trl_version("1.17.0", GRPOTrainer) == "1.17.0"

    # ... and an ImportError naming the hook that is gone (or whose parameters changed).
    class Renamed(GRPOTrainer):
        _calculate_rewards = None

        def _generate_single_turn(self, prompt_ids, images, multimodal_fields):
            pass

    with pytest.raises(ImportError, match=r"trl 2\.0\.0 lacks .*GRPOTrainer\._generate_single_turn\(num_generations\), "
                                          r"GRPOTrainer\._calculate_rewards"):
        check_trl_version("2.0.0", Renamed)


def test_unsupported_trl_fails_at_import(monkeypatch):
    import importlib.metadata

    monkeypatch.setattr(importlib.metadata, "version", lambda name: "1.14.0" if name == "trl" else "0")
    monkeypatch.delitem(sys.modules, "reinforce_ada.integrations.trl")
    with pytest.raises(ImportError, match=r"trl>=1.14.1,<1.17 but trl 1\.14\.0 is installed"):
        import reinforce_ada.integrations.trl  # noqa: F401


# -- the reward adapter ------------------------------------------------------------------------------------------------
def test_reward_verifier_weights_and_none():
    def correct(prompts, completions, answer, **kwargs):
        return [float(c == a) for c, a in zip(completions, answer)]

    def short(prompts, completions, **kwargs):
        return [None if c == "?" else float(len(c) <= 1) for c in completions]

    trainer = SimpleNamespace(reward_funcs=[correct, short], reward_processing_classes=[None, None],
                              reward_func_names=["correct", "short"], reward_weights=torch.tensor([1.0, 0.5]),
                              state=None, accelerator=None, _log_metric=lambda name, value: None)
    prompt = Prompt(0, "1+1=", answer="2", metadata={"trl_row": {"prompt": "1+1=", "answer": "2"}})
    completions = [Completion(0, "2"), Completion(0, "22"), Completion(0, "?")]
    # The sampler gets the correctness score (here: `correct` alone, unweighted) ...
    verifier = TRLRewardVerifier(trainer, correctness=[0])
    assert verifier([prompt] * 3, completions) == [1.0, 0.0, 0.0]
    # ... and every function's value is kept for the advantages (None -> NaN, as TRL).
    assert verifier.values_for(completions[0]) == [1.0, 1.0]
    assert verifier.values_for(completions[2])[0] == 0.0 and math.isnan(verifier.values_for(completions[2])[1])
    # Correctness from both functions: their unweighted sum; None only when all of them are None.
    assert TRLRewardVerifier(trainer, correctness=[0, 1])([prompt] * 3, completions) == [2.0, 0.0, 0.0]
    assert TRLRewardVerifier(trainer, correctness=[1])([prompt] * 3, completions) == [1.0, 0.0, None]


def test_reward_verifier_parses_chat_completions_like_trl(monkeypatch):
    # With a tokenizer that has a response schema, TRL parses chat completions with parse_response (tool calls,
    # reasoning); the verifier does the same, with the prompt's token ids as the prefix.
    import trl.chat_template_utils

    seen = []

    def fake_parse(tokenizer, ids, prefix=None):
        return {"role": "assistant", "content": f"parsed {len(ids)} after {len(prefix)}"}

    def record(prompts, completions, **kwargs):
        seen.extend(completions)
        return [0.0] * len(completions)

    monkeypatch.setattr(trl.chat_template_utils, "parse_response", fake_parse)
    chat = [{"role": "user", "content": "1+1="}]
    prompt = Prompt(0, chat, metadata={"trl_row": {"prompt": chat}, "trl_prompt_ids": [5, 6, 7]})
    trainer = SimpleNamespace(reward_funcs=[record], reward_processing_classes=[None], reward_func_names=["record"],
                              reward_weights=torch.tensor([1.0]), state=None, _log_metric=None,
                              _tokenizer=SimpleNamespace(response_schema={"type": "object"}))
    TRLRewardVerifier(trainer)([prompt], [Completion(0, "2", token_ids=[9, 1])])
    import transformers
    from packaging.version import Version

    if Version(transformers.__version__) >= Version("5.0.0"):
        assert seen == [[{"role": "assistant", "content": "parsed 2 after 3"}]]
    else:  # TRL parses with the response schema only on transformers >= 5; before, the text as the content
        assert seen == [[{"role": "assistant", "content": "2"}]]
    trainer._tokenizer = SimpleNamespace(response_schema=None)  # no schema: TRL's plain decode
    seen.clear()
    TRLRewardVerifier(trainer)([prompt], [Completion(0, "2", token_ids=[9, 1])])
    assert seen == [[{"role": "assistant", "content": "2"}]]


# -- vLLM colocate mode: TRL's own VLLMGeneration code, with only vLLM's LLM engine faked ------------------------------
class FakeLLM:
    """Stands in for ``vllm.LLM``: one random completion per prompt (``n=1``), every token's logprob -0.5."""

    def __init__(self, vocab_size, eos_token_id):
        self.vocab_size, self.eos_token_id = vocab_size, eos_token_id
        self.generator = torch.Generator().manual_seed(0)
        self.calls: list[int] = []
        self.llm_engine = SimpleNamespace(model_executor=SimpleNamespace(driver_worker=SimpleNamespace(
            model_runner=SimpleNamespace(model=SimpleNamespace(load_weights=lambda weights: None)))))

    def reset_prefix_cache(self):
        pass

    def generate(self, prompts, sampling_params, use_tqdm=False):
        assert sampling_params["n"] == 1
        self.calls.append(len(prompts))
        outputs = []
        for prompt in prompts:
            length = int(torch.randint(1, sampling_params["max_tokens"] + 1, (1,), generator=self.generator))
            ids = torch.randint(3, self.vocab_size, (length,), generator=self.generator).tolist()
            if length < sampling_params["max_tokens"]:
                ids[-1] = self.eos_token_id
            logprobs = [{t: SimpleNamespace(logprob=-0.5, rank=1)} for t in ids]
            outputs.append(SimpleNamespace(prompt_token_ids=prompt["prompt_token_ids"],
                                           outputs=[SimpleNamespace(token_ids=ids, logprobs=logprobs)]))
        return outputs


def test_vllm_colocate_mode_generates_every_round_through_trl(tmp_path, monkeypatch):
    from trl.generation import vllm_generation

    from reinforce_ada.models.tiny import TINY_VOCAB

    tokenizer = build_char_tokenizer()
    fake = FakeLLM(len(TINY_VOCAB), tokenizer.eos_token_id)

    def fake_init_vllm(self):
        self.llm, self._llm_weights_sleeping = fake, False

    monkeypatch.setattr(vllm_generation.VLLMGeneration, "_init_vllm", fake_init_vllm)
    monkeypatch.setattr(vllm_generation, "SamplingParams", lambda **kwargs: kwargs, raising=False)
    dataset = Dataset.from_dict({"prompt": ["1+1=", "2+2=", "3+3=", "4+4="]})
    args = base_args(tmp_path, use_vllm=True, vllm_mode="colocate", max_steps=1, max_completion_length=6,
                     vllm_importance_sampling_mode="token_truncate", vllm_importance_sampling_clip_max=2.0)
    trainer = RecordingTrainer(model=build_tiny_model(), reward_funcs=scripted_reward, args=args,
                               train_dataset=dataset, processing_class=tokenizer)
    trainer.train()

    batch = trainer.batches[0]
    # One vLLM call per round, holding exactly the rows the round asked for.
    assert fake.calls == [stats.num_samples for stats in batch.rounds]
    assert sum(fake.calls) == sum(p.num_drawn for p in batch.pools.values())
    # vLLM's sampling log-probabilities reach TRL's importance-sampling correction, one per completion token.
    inputs = trainer.loss_inputs[0]
    mask = inputs["completion_mask"].bool()
    assert torch.all(inputs["sampling_per_token_logps"][mask] == -0.5)
    # TRL's own correction runs on them (the rollout log-probs of every round's kept completions): per token
    # min(exp(old - rollout), C), and its mismatch metric is |old - rollout|.
    old = inputs["old_per_token_logps"]
    expected = torch.clamp(torch.exp(old + 0.5), max=2.0)
    torch.testing.assert_close(inputs["importance_sampling_ratio"][mask], expected[mask])
    logged = [log["sampling/sampling_logp_difference/mean"] for log in trainer.state.log_history
              if "sampling/sampling_logp_difference/mean" in log]
    assert logged == [pytest.approx(float((old + 0.5).abs()[mask].mean()), rel=1e-5)]
    # ... and the trained advantages are still ours (TRL shuffles rows, so compare as multisets).
    assert sorted(inputs["advantages"].tolist()) == pytest.approx(sorted(trainer.trained_advantages[0]), abs=1e-6)


@pytest.mark.parametrize("setup, collective", [
    (dict(num_processes=1, use_vllm=True, mode="server"), False),  # one process: nothing to keep in step
    (dict(num_processes=2), False),  # plain generation under DDP
    (dict(num_processes=2, use_vllm=True, mode="server"), True),
    (dict(num_processes=2, use_vllm=True, mode="colocate", tp=1), False),
    (dict(num_processes=2, use_vllm=True, mode="colocate", tp=2), True),
    (dict(num_processes=2, deepspeed_stage=2), False),
    (dict(num_processes=2, deepspeed_stage=3), True),
    (dict(num_processes=2, fsdp=True), True),
])
def test_which_backends_are_padded_to_equal_rows(setup, collective):
    from reinforce_ada.integrations.trl import TRLGenerator

    stage = setup.get("deepspeed_stage")
    trainer = SimpleNamespace(
        accelerator=SimpleNamespace(num_processes=setup["num_processes"], state=SimpleNamespace(
            deepspeed_plugin=SimpleNamespace(zero_stage=stage) if stage else None)),
        is_deepspeed_enabled=stage is not None, is_fsdp_enabled=setup.get("fsdp", False),
        use_vllm=setup.get("use_vllm", False),
        vllm_generation=SimpleNamespace(mode=setup.get("mode"), tensor_parallel_size=setup.get("tp", 1)))
    assert TRLGenerator(trainer).generation_is_collective() is collective
