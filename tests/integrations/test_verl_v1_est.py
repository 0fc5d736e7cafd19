"""Reinforce-Ada-Est on verl's v1 trainer, at the level of verl's own functions on the CPU.

What runs here is verl's code wherever the plugin meets it: the composed ``ppo_trainer`` config and verl's
``validate_config``; ``AgentLoopManagerTQ.generate_sequences`` (chunking a batch over workers) and
``AgentLoopWorkerTQ.generate_sequences`` / ``_run_prompt`` (which read ``__rollout_n__`` and start that many
sessions), with the agent loop itself and TransferQueue's writes replaced by recorders; verl's
``compute_advantage_for_multi_trajectories`` (what ``PPOTrainer._compute_advantage`` calls) with the registered
``reinforce_ada_est`` estimator, verl's padding rows included; verl's checkpoint tracker and
``find_latest_ckpt_path`` for resume; ``TaskRunnerV1`` for the entry point. Not run: Ray workers, vLLM/SGLang,
FSDP, TransferQueue's storage (a one-step GPU run is the proof of those; see docs/verl.md).

Every test's name carries ``v1`` and ``est`` (``pytest tests/integrations -k "v1 and est"``).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import uuid

import numpy as np
import pytest

pytest.importorskip("verl")
pytest.importorskip("transfer_queue")  # the v1 trainer's import; in the verl extra (docs/verl.md)

import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from reinforce_ada.config import ConfigError, EstConfig, SamplerConfig  # noqa: E402
from reinforce_ada.errors import CheckpointError  # noqa: E402
from reinforce_ada.integrations.verl.config import (  # noqa: E402
    EST_CONFIG_NAME,
    check_verl_config,
    compose_trainer_config,
)

RUNNABLE = [
    "actor_rollout_ref.model.path=/models/none",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4",
    "actor_rollout_ref.actor.ppo_mini_batch_size=4",
    "data.train_batch_size=4",
    "trainer.n_gpus_per_node=1",
]
PROMPTS = {"a": 0.05, "b": 0.3, "c": 0.7, "d": 1.0}  # prompt id -> pass rate of its scripted rewards


@pytest.fixture(scope="module")
def est_trainer_config():
    return compose_trainer_config(RUNNABLE, config_name=EST_CONFIG_NAME)


def _config(base, tmp_path=None, **updates):
    cfg = OmegaConf.create(OmegaConf.to_container(base))
    if tmp_path is not None:
        OmegaConf.update(cfg, "trainer.default_local_dir", str(tmp_path))
    for key, value in updates.items():
        OmegaConf.update(cfg, key, value)
    return cfg


# -- the config ----------------------------------------------------------------------------------------------------
def test_v1_est_config_is_verls_ppo_trainer_plus_est_and_passes_verls_validation(est_trainer_config):
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    cfg = est_trainer_config
    sampler = check_verl_config(cfg)
    assert (sampler.mode, sampler.selection, sampler.exit_rule, sampler.objective_in_use) == ("est", "all", "once",
                                                                                              "log")
    assert sampler.est == EstConfig()  # the standalone trainer's sampler.est.* defaults
    assert cfg.trainer.use_v1 is True and cfg.trainer.v1.trainer_mode == "sync"
    assert cfg.actor_rollout_ref.rollout.n == sampler.est.samples_per_prompt == 8
    validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    assert need_critic(cfg) is False


def test_v1_est_yaml_carries_the_standalone_est_names_and_defaults():
    import yaml

    from reinforce_ada.integrations.verl.config import CONFIG_DIR

    block = yaml.safe_load(open(os.path.join(CONFIG_DIR, EST_CONFIG_NAME + ".yaml")))["algorithm"]["reinforce_ada"]
    defaults = EstConfig()
    assert set(block["est"]) == {f for f in EstConfig.__dataclass_fields__} - {"budget"}
    for key, value in block["est"].items():
        assert value == getattr(defaults, key), key
    sampler = SamplerConfig()
    for key in ("objective", "sample_share", "objective_eps", "max_grad_weight", "positive_threshold", "normalize_std",
                "epsilon"):
        assert block[key] == getattr(sampler, key), key


def test_v1_est_overrides_reach_est_and_the_objective_family(est_trainer_config):
    cfg = _config(est_trainer_config, **{"algorithm.reinforce_ada.est.decay": 0.5,
                                         "algorithm.reinforce_ada.est.min_samples": 1,
                                         "algorithm.reinforce_ada.objective": "power:0.5",
                                         "algorithm.reinforce_ada.sample_share": 0.25,
                                         "algorithm.reinforce_ada.max_grad_weight": 4.0})
    sampler = check_verl_config(cfg)
    assert (sampler.est.decay, sampler.est.min_samples) == (0.5, 1)
    assert (sampler.objective_in_use, sampler.sample_share_in_use, sampler.max_grad_weight) == ("power:0.5", 0.25, 4.0)


@pytest.mark.parametrize("key, value, message", [
    ("algorithm.adv_estimator", "grpo", "algorithm.adv_estimator='grpo'"),
    ("trainer.use_v1", False, "trainer.use_v1=False"),
    ("actor_rollout_ref.rollout.agent.agent_loop_manager_class",
     "reinforce_ada.integrations.verl.agent_loop.ReinforceAdaAgentLoopManager", "agent_loop_manager_class"),
    ("trainer.checkpoint_callback_class", None, "trainer.checkpoint_callback_class"),
    ("actor_rollout_ref.rollout.n", 4, "rollout.n=4 differs from .*samples_per_prompt=8"),
    ("algorithm.reinforce_ada.est.budget", 32, "est.budget is not taken"),
    ("algorithm.reinforce_ada.est.decay", 0.0, "est.decay"),
    ("algorithm.reinforce_ada.est.max_samples", 1, "est.max_samples"),
    ("algorithm.reinforce_ada.est.max_samples", 4, "samples_per_prompt 8 .* is above .*est.max_samples=4"),
    ("algorithm.reinforce_ada.objective", "cubic", "objective"),
    ("algorithm.reinforce_ada.samples_per_round", 8, "samples_per_round is not taken with mode=est"),
    ("algorithm.reinforce_ada.mode", "rounds", "mode='rounds'"),
    ("algorithm.use_kl_in_reward", True, "use_kl_in_reward"),
    ("algorithm.filter_groups.enable", True, "filter_groups"),
])
def test_v1_est_bad_settings_are_rejected_with_the_key_named(est_trainer_config, key, value, message):
    cfg = _config(est_trainer_config, **{key: value})
    with pytest.raises(ConfigError, match=message):
        check_verl_config(cfg)


def test_v1_est_seq_on_v1_stays_refused_with_its_reason_and_est_needs_v1():
    seq = compose_trainer_config(RUNNABLE + ["trainer.use_v1=true"])
    with pytest.raises(ConfigError, match="round-based sampler.*Why Seq does not run on the v1 trainer"):
        check_verl_config(seq)
    legacy_est = compose_trainer_config(RUNNABLE + ["+algorithm.reinforce_ada.mode=est"])  # the Seq config, mode=est
    with pytest.raises(ConfigError, match="adv_estimator"):
        check_verl_config(legacy_est)


# -- allocation: __rollout_n__ through verl's manager and worker ---------------------------------------------------
class _RecordingWorker:
    """verl's ``AgentLoopWorkerTQ`` code (``generate_sequences`` -> ``_run_prompt``) with the agent loop replaced by
    a recorder of the sessions it starts; stands in for the Ray actor handle the manager dispatches to."""

    def __init__(self, config):
        from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopWorkerTQ

        from reinforce_ada.integrations.verl.main_ppo import _plain_class

        self.worker = object.__new__(_plain_class(AgentLoopWorkerTQ))
        self.worker.config = config
        self.worker.background_tasks = set()
        self.sessions: list[dict] = []

        async def run_agent_loop(sampling_params, trajectory, trace, session_id, **prompt):
            self.sessions.append({"uid": prompt["uid"], "session_id": session_id, "keys": set(prompt)})

        self.worker._run_agent_loop = run_agent_loop
        self.generate_sequences = self  # worker.generate_sequences.remote(chunk)

    def remote(self, chunk):
        async def run():
            await self.worker.generate_sequences(chunk)
            await asyncio.gather(*list(self.worker.background_tasks))

        asyncio.run(run())


@pytest.fixture
def verl_dispatch(monkeypatch):
    """TransferQueue's status writes recorded; ``ray.get`` over already-finished recorders."""
    import ray
    from verl.trainer.ppo.v1 import agent_loop_tq

    statuses: list[tuple[str, str]] = []

    async def kv_put(key, partition_id, tag=None, **_):
        statuses.append((key, tag["status"]))

    monkeypatch.setattr(agent_loop_tq.tq, "async_kv_put", kv_put)
    monkeypatch.setattr(ray, "get", lambda refs: refs)
    return statuses


def _manager(config, num_workers=2):
    from reinforce_ada.integrations.verl.agent_loop_v1 import ReinforceAdaEstAgentLoopManager

    manager = ReinforceAdaEstAgentLoopManager(config, llm_client=None)
    manager.agent_loop_workers = [_RecordingWorker(config) for _ in range(num_workers)]
    return manager


def _batch(prompt_ids, step, validate=False):
    """A v1 training batch as ``PPOTrainer._next_train_batch`` builds it (dataloader columns, fresh uids)."""
    from verl.utils import tensordict_utils as tu

    columns = {
        "uid": np.array([str(uuid.uuid4()) for _ in prompt_ids], dtype=object),
        "raw_prompt": np.array([[{"role": "user", "content": f"prompt {pid}"}] for pid in prompt_ids] + [None],
                               dtype=object)[:-1],
        "reward_model": np.array([{"ground_truth": "1", "style": "rule"} for _ in prompt_ids], dtype=object),
        "data_source": np.array(["scripted"] * len(prompt_ids), dtype=object),
        "index": np.arange(len(prompt_ids)),
        "input_ids": torch.ones(len(prompt_ids), 3, dtype=torch.long),
    }
    batch = tu.get_tensordict(columns)
    tu.assign_non_tensor_data(batch, "global_steps", step)
    if validate:
        tu.assign_non_tensor_data(batch, "validate", True)
    return batch


def _sessions(manager):
    return [s for worker in manager.agent_loop_workers for s in worker.sessions]


def test_v1_est_rollout_n_comes_from_the_memory_through_verls_agent_loop_worker(est_trainer_config, tmp_path,
                                                                                 verl_dispatch):
    from reinforce_ada.integrations.verl.est import current_driver

    from reinforce_ada.sampling.estimate import est_allocation
    from reinforce_ada.types import Prompt

    manager = _manager(_config(est_trainer_config, tmp_path))
    assert current_driver() is manager.est
    # the memory believes "a" hard and "d" easy: Est gives "a" more of the same budget
    for _ in range(3):
        manager.est.memory.update(_key("a"), 0, 8)
        manager.est.memory.update(_key("d"), 8, 0)
    prompts = [Prompt(pid, [{"role": "user", "content": f"prompt {pid}"}], answer="1") for pid in "abcd"]
    expected, _, _ = est_allocation(manager.est.memory, prompts, manager.est.config)
    batch = _batch(list("abcd"), step=1)
    manager.generate_sequences(batch)
    sessions = _sessions(manager)
    per_uid = {uid: sum(s["uid"] == uid for s in sessions) for uid in batch["uid"]}
    counts = [per_uid[uid] for uid in batch["uid"]]
    assert counts == expected.tolist() and counts[0] > counts[1] == counts[2] > counts[3]
    assert sum(counts) == 8 * 4  # GRPO-n8's rows: rollout.n x prompts
    for uid in batch["uid"]:  # sessions 0..N_x-1, each prompt finished once
        assert sorted(s["session_id"] for s in sessions if s["uid"] == uid) == list(range(per_uid[uid]))
        assert (uid, "finished") in verl_dispatch
    assert not any("__rollout_n__" in s["keys"] for s in sessions)  # verl pops it before the agent loop
    assert len(manager.est.pending) == 4


def test_v1_est_validation_batches_pass_through_with_val_n(est_trainer_config, tmp_path, verl_dispatch):
    cfg = _config(est_trainer_config, tmp_path, **{"actor_rollout_ref.rollout.val_kwargs.n": 2})
    manager = _manager(cfg)
    manager.generate_sequences(_batch(list("abc"), step=0, validate=True))
    assert len(_sessions(manager)) == 3 * 2 and not manager.est.pending


def _key(pid):
    from reinforce_ada.sampling.memory import prompt_key
    from reinforce_ada.types import Prompt

    return prompt_key(Prompt(pid, [{"role": "user", "content": f"prompt {pid}"}], answer="1"))


# -- advantage and memory: verl's compute_advantage_for_multi_trajectories -----------------------------------------
def _rows(uids, counts, rewards, response_length=3, num_padding=0):
    """What ``PPOTrainer._compute_advantage`` hands verl's advantage code: one row per session (keys
    ``{uid}_{session}_0``), the reward on the last response token; then verl's padding rows
    (``upsample_batch_to_divisible_size``: a ``pad...`` uid, no response token, reward 0)."""
    from verl import DataProto

    keys, row_uids = [], []
    for uid, n in zip(uids, counts):
        keys += [f"{uid}_{j}_0" for j in range(n)]
        row_uids += [uid] * n
    pad_uid = f"pad{uuid.uuid4().hex}"
    keys += [f"{pad_uid}_{j}_0" for j in range(num_padding)]
    row_uids += [pad_uid] * num_padding
    num_rows = len(keys)
    mask = torch.zeros(num_rows, response_length)
    mask[: num_rows - num_padding] = 1.0
    scores = torch.zeros(num_rows, response_length)
    scores[: num_rows - num_padding, -1] = torch.as_tensor(np.asarray(rewards, dtype=np.float32))
    data = DataProto.from_dict(tensors={"token_level_rewards": scores, "response_mask": mask},
                               non_tensors={"uid": np.array(row_uids, dtype=object)})
    return data, keys


def _verl_advantages(config, data, keys):
    from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories

    out = compute_advantage_for_multi_trajectories(
        data, batch_keys=keys, adv_estimator=config.algorithm.adv_estimator, gamma=1.0, lam=1.0,
        num_repeat=config.actor_rollout_ref.rollout.n, norm_adv_by_std_in_grpo=True, config=config.algorithm)
    return out.batch["advantages"]


def test_v1_est_advantage_is_the_weighted_centred_reward_by_uid_and_padding_rows_get_zero(est_trainer_config,
                                                                                          tmp_path, verl_dispatch):
    cfg = _config(est_trainer_config, tmp_path)
    manager = _manager(cfg)
    batch = _batch(list("ab"), step=1)
    manager.generate_sequences(batch)
    uids = list(batch["uid"])
    counts = [manager.est.pending[u].num_samples for u in uids]
    assert counts == [8, 8]  # an empty memory spends the budget evenly
    rewards = [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0] + [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    data, keys = _rows(uids, counts, rewards, num_padding=3)
    advantages = _verl_advantages(cfg, data, keys)  # (19, 3)
    # prompt a: rbar = 1/8, w = 1 / sqrt(1/8 + 1e-6); prompt b: rbar = 1/2, w = 1 / sqrt(1/2 + 1e-6)
    w_a, w_b = 1 / np.sqrt(1 / 8 + 1e-6), 1 / np.sqrt(1 / 2 + 1e-6)
    expected = [w_a * (r - 1 / 8) for r in rewards[:8]] + [w_b * (r - 1 / 2) for r in rewards[8:]] + [0.0] * 3
    np.testing.assert_allclose(advantages[:, -1].numpy(), expected, rtol=1e-6)
    assert torch.equal(advantages[:, 0] == 0, torch.tensor([False] * 16 + [True] * 3))  # masked by response_mask
    # the visits: 1 of 8 and 4 of 8 on Beta(1, 1)
    assert manager.est.memory.pass_rate(_key("a")) == pytest.approx(2 / 10)
    assert manager.est.memory.pass_rate(_key("b")) == pytest.approx(5 / 10)
    assert not manager.est.pending


def test_v1_est_an_all_equal_group_with_normalize_std_and_epsilon_0_gets_advantage_0(est_trainer_config, tmp_path,
                                                                                      verl_dispatch):
    """normalize_std with epsilon=0, the smallest the config accepts: prompt a's rewards are all 0.3 (zero spread), so
    its advantage is 0 -- it was NaN, which verl's engine answers by skipping the step -- and b keeps its weighted
    z-score, in what verl's advantage code hands the loss."""
    cfg = _config(est_trainer_config, tmp_path, **{"algorithm.reinforce_ada.normalize_std": True,
                                                   "algorithm.reinforce_ada.epsilon": 0.0})
    manager = _manager(cfg)
    batch = _batch(list("ab"), step=1)
    manager.generate_sequences(batch)
    uids = list(batch["uid"])
    counts = [manager.est.pending[u].num_samples for u in uids]
    rewards = [0.3] * counts[0] + [1.0, 1.0, 0.0, 0.0] + [0.0] * (counts[1] - 4)
    advantages = _verl_advantages(cfg, *_rows(uids, counts, rewards, num_padding=1))
    assert torch.isfinite(advantages).all()
    assert (advantages[:counts[0]] == 0).all()
    b = np.array(rewards[counts[0]:])
    expected = (b - b.mean()) / b.std(ddof=1) * min(1 / np.sqrt(b.mean() + 1e-6), 8.0)
    np.testing.assert_allclose(advantages[counts[0]:-1, -1].numpy(), expected, rtol=1e-6)


def test_v1_est_rewards_outside_0_1_are_weighed_at_the_pass_rate(est_trainer_config, tmp_path, verl_dispatch):
    """A reward function scoring 3 (correct) or -2: the weight is w(share of rows above positive_threshold), as
    docs/verl.md states, not w of the mean reward (whose clip to [0, 1] put every such prompt at the cap)."""
    cfg = _config(est_trainer_config, tmp_path)
    manager = _manager(cfg)
    batch = _batch(list("ab"), step=1)
    manager.generate_sequences(batch)
    uids = list(batch["uid"])
    counts = [manager.est.pending[u].num_samples for u in uids]
    assert counts == [8, 8]
    rewards = [3.0, 3.0] + [-2.0] * 6 + [3.0] * 4 + [-2.0] * 4  # pass rates 1/4 and 1/2; mean rewards -0.75, 0.5
    advantages = _verl_advantages(cfg, *_rows(uids, counts, rewards))[:, -1].numpy()
    expected = []
    for r, pass_rate in ((np.array(rewards[:8]), 0.25), (np.array(rewards[8:]), 0.5)):
        expected += ((r - r.mean()) * min(1 / np.sqrt(pass_rate + 1e-6), 8.0)).tolist()
    np.testing.assert_allclose(advantages, expected, rtol=1e-6)
    assert manager.est.memory.pass_rate(_key("a")) == pytest.approx(3 / 10)  # 2 of 8 on Beta(1, 1)


def test_v1_est_through_verls_ppo_trainer_compute_advantage(est_trainer_config, tmp_path, verl_dispatch, monkeypatch):
    """verl's own ``PPOTrainer._compute_advantage``: it reads its fixed fields (uid, response_mask, rm_scores, ...)
    from TransferQueue -- here a TensorDict built by verl's ``list_of_dict_to_tensordict`` as the agent loop stores
    rows, responses of different lengths -- and writes the advantages back nested; those fields are all Est needs."""
    from transfer_queue import KVBatchMeta
    from verl.trainer.ppo.v1 import trainer_base
    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    cfg = _config(est_trainer_config, tmp_path)
    manager = _manager(cfg)
    batch = _batch(list("ab"), step=1)
    manager.generate_sequences(batch)
    rng = np.random.default_rng(0)
    rows, keys, rewards, lengths = [], [], {}, []
    for uid in batch["uid"]:
        for j in range(manager.est.pending[uid].num_samples):
            length, reward = int(rng.integers(2, 6)), float(rng.random() < 0.5)
            scores = torch.zeros(length)
            scores[-1] = reward
            rows.append({"uid": uid, "response_mask": torch.ones(length, dtype=torch.int64), "rm_scores": scores})
            keys.append(f"{uid}_{j}_0")
            rewards.setdefault(uid, []).append(reward)
            lengths.append(length)
    stored, written = list_of_dict_to_tensordict(rows), {}

    def kv_batch_get(keys, partition_id, select_fields):
        return stored.select(*[f for f in select_fields if f in stored.keys()])

    def kv_batch_put(keys, partition_id, fields):
        written.update(fields=fields)
        return KVBatchMeta(partition_id=partition_id, keys=keys, tags=[{}] * len(keys))

    monkeypatch.setattr(trainer_base.tq, "kv_batch_get", kv_batch_get)
    monkeypatch.setattr(trainer_base.tq, "kv_batch_put", kv_batch_put)
    trainer = type("Trainer", (), {"config": cfg})()
    trainer_base.PPOTrainer._compute_advantage(trainer, KVBatchMeta(partition_id="train", keys=keys,
                                                                    tags=[{}] * len(keys)), {})
    advantages = written["fields"]["advantages"].unbind()  # nested: one response length per row
    assert [len(a) for a in advantages] == lengths
    expected = []
    for uid in batch["uid"]:
        rbar = np.mean(rewards[uid])
        expected += [min(1 / np.sqrt(rbar + 1e-6), 8.0) * (r - rbar) for r in rewards[uid]]
    np.testing.assert_allclose([a[0].item() for a in advantages], expected, rtol=1e-6, atol=1e-7)
    assert len(manager.est.memory) == 2 and not manager.est.pending


def test_v1_est_rows_it_did_not_allocate_or_several_outputs_per_session_are_errors(est_trainer_config, tmp_path,
                                                                                   verl_dispatch):
    cfg = _config(est_trainer_config, tmp_path)
    manager = _manager(cfg)
    batch = _batch(list("a"), step=1)
    manager.generate_sequences(batch)
    data, keys = _rows(["never-allocated"], [2], [1.0, 0.0])
    with pytest.raises(RuntimeError, match="never allocated"):
        _verl_advantages(cfg, data, keys)
    uid = batch["uid"][0]
    data, keys = _rows([uid], [9], [1.0] * 9)  # 9 rows for an allocation of 8: two outputs in one session
    with pytest.raises(RuntimeError, match="several outputs per session"):
        _verl_advantages(cfg, data, keys)


def test_v1_est_without_the_manager_the_estimator_names_it():
    from reinforce_ada.integrations.verl.est import current_driver, install_driver

    install_driver(None)
    with pytest.raises(RuntimeError, match="agent_loop_manager_class"):
        current_driver()


# -- equivalence with the standalone EstSampler ---------------------------------------------------------------------
class _ScriptGenerator:
    """The standalone sampler's generator: prompt ``pid``'s ``k``-th sample carries ``script[pid][k]`` as its text."""

    def __init__(self, script):
        self.script, self.drawn = script, dict.fromkeys(script, 0)

    def generate(self, requests):
        from reinforce_ada.types import Completion

        outputs = []
        for request in requests:
            pid, n = request.prompt.prompt_id, request.num_samples
            outputs.append([Completion(pid, repr(r)) for r in self.script[pid][self.drawn[pid]: self.drawn[pid] + n]])
            self.drawn[pid] += n
        return outputs


class _ScriptVerifier:
    def __call__(self, prompts, completions):
        return [float(c.text) for c in completions]


def _script(seed=0, length=400):
    rng = np.random.default_rng(seed)
    return {pid: [float(x) for x in rng.random(length) < rate] for pid, rate in PROMPTS.items()}


def _verl_step(manager, cfg, step, script, cursor):
    """One v1 step: allocation through verl's manager and worker, the scripted rewards of the sessions started, then
    verl's advantage code. Returns (counts, advantages per row in prompt order). (verl builds one manager per
    driver process; a test that holds two makes the one it steps the estimator's.)"""
    from reinforce_ada.integrations.verl.est import install_driver

    install_driver(manager.est)
    for worker in manager.agent_loop_workers:
        worker.sessions.clear()
    batch = _batch(list(PROMPTS), step=step)
    manager.generate_sequences(batch)
    uids = list(batch["uid"])
    sessions = _sessions(manager)
    counts = [sum(s["uid"] == uid for s in sessions) for uid in uids]
    rewards = []
    for pid, n in zip(PROMPTS, counts):
        rewards += script[pid][cursor[pid]: cursor[pid] + n]
        cursor[pid] += n
    data, keys = _rows(uids, counts, rewards, num_padding=1)
    return counts, _verl_advantages(cfg, data, keys)[:-1, -1].numpy()


@pytest.mark.parametrize("algorithm", [{}, {"objective": "linear"}, {"est.allocation": "variance-optimal"},
                                       {"objective": "power:0.5", "sample_share": 0.25, "est.decay": 0.7}])
def test_v1_est_gives_the_standalone_est_samplers_counts_advantages_and_memory(est_trainer_config, tmp_path,
                                                                               verl_dispatch, algorithm):
    from reinforce_ada.sampling.factory import build_sampler
    from reinforce_ada.types import Prompt

    cfg = _config(est_trainer_config, tmp_path, **{f"algorithm.reinforce_ada.{k}": v for k, v in algorithm.items()})
    manager = _manager(cfg)
    script, cursor = _script(), dict.fromkeys(PROMPTS, 0)
    sampler = build_sampler(manager.est.config, _ScriptGenerator(_script()), _ScriptVerifier())
    prompts = [Prompt(pid, [{"role": "user", "content": f"prompt {pid}"}], answer="1") for pid in PROMPTS]
    all_counts = []
    for step in range(1, 6):
        counts, advantages = _verl_step(manager, cfg, step, script, cursor)
        batch = sampler.sample(prompts)
        assert counts == [len(g.completions) for g in batch.groups]
        np.testing.assert_allclose(advantages, batch.advantages, rtol=1e-5, atol=1e-6)  # float32 in verl's tensors
        assert manager.est.memory.state_dict() == sampler.memory.state_dict()
        all_counts.append(counts)
    if manager.est.config.objective_in_use == "linear":  # w_sample = 1: GRPO-n8's even split, step after step
        assert {c for counts in all_counts for c in counts} == {8}
    else:  # prompts recur and the allocation moves
        assert len({c for counts in all_counts for c in counts}) > 1


# -- checkpoint and resume ------------------------------------------------------------------------------------------
class _Workers:
    """The actor worker group and dataloader of verl's trainer, as far as its checkpoint code touches them."""

    def save_checkpoint(self, *args, **kwargs):
        pass

    def load_checkpoint(self, *args, **kwargs):
        pass

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


def _verl_trainer(config, step=0):
    """A stand-in ``PPOTrainer`` for verl's own ``_save_checkpoint`` / ``_load_checkpoint``: the config, the checkpoint
    callback verl builds from it (``trainer.checkpoint_callback_class``), stub worker groups."""
    from verl.trainer.ppo.checkpoint_callback import build_checkpoint_callback

    trainer = type("Trainer", (), {})()
    trainer.config, trainer.global_steps, trainer.trainer_mode, trainer.use_critic = config, step, "sync", False
    trainer.actor_rollout_wg = trainer.train_dataloader = _Workers()
    trainer.checkpoint_callback = build_checkpoint_callback(config)
    return trainer


@pytest.mark.parametrize("resume_mode", ["auto", "resume_path"])
def test_v1_est_memory_is_saved_with_verls_checkpoint_and_a_resumed_run_allocates_as_an_uninterrupted_one(
        est_trainer_config, tmp_path, verl_dispatch, resume_mode):
    cfg = _config(est_trainer_config, tmp_path / "run")
    uninterrupted = _manager(cfg)
    script, cursor = _script(1), dict.fromkeys(PROMPTS, 0)
    for step in range(1, 4):
        _verl_step(uninterrupted, cfg, step, script, cursor)
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    PPOTrainer._save_checkpoint(_verl_trainer(cfg, step=3))  # verl's save: actor, data.pt, tracker, then the callback
    folder = os.path.join(str(tmp_path / "run"), "global_step_3")
    saved = json.load(open(os.path.join(folder, "reinforce_ada_est.json")))
    assert saved["memory"] == json.loads(json.dumps(uninterrupted.est.memory.state_dict()))

    updates = {"trainer.resume_mode": resume_mode}
    if resume_mode == "resume_path":
        updates["trainer.resume_from_path"] = folder
    resumed_config = _config(cfg, **updates)
    trainer = _verl_trainer(resumed_config)
    PPOTrainer._load_checkpoint(trainer)  # verl's resume decision ...
    assert trainer.global_steps == 3
    resumed = _manager(resumed_config)  # ... then verl builds the manager, which reads the memory from the same folder
    assert resumed.est.memory.state_dict() == uninterrupted.est.memory.state_dict()
    resumed_cursor = dict(cursor)
    for step in range(4, 6):
        expected = _verl_step(uninterrupted, cfg, step, script, cursor)
        got = _verl_step(resumed, cfg, step, script, resumed_cursor)
        assert got[0] == expected[0]
        np.testing.assert_array_equal(got[1], expected[1])
    assert resumed.est.memory.state_dict() == uninterrupted.est.memory.state_dict()


def test_v1_est_resuming_from_a_checkpoint_without_the_memory_is_an_error_and_disable_starts_afresh(
        est_trainer_config, tmp_path, verl_dispatch):
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    cfg = _config(est_trainer_config, tmp_path)
    # a checkpoint verl saved without Est's callback (e.g. a GRPO run)
    PPOTrainer._save_checkpoint(_verl_trainer(_config(cfg, **{"trainer.checkpoint_callback_class": None}), step=2))
    assert os.path.exists(tmp_path / "global_step_2" / "data.pt")
    with pytest.raises(CheckpointError, match="holds no reinforce_ada_est.json"):
        _manager(cfg)
    fresh = _manager(_config(cfg, **{"trainer.resume_mode": "disable"}))
    assert len(fresh.est.memory) == 0


# -- every input checked before Ray: the entry point with run_ppo (Ray's start) replaced by a failure ------------------
def _before_ray(monkeypatch):
    """``main_ppo.run`` with verl's ``run_ppo`` -- where Ray starts -- a test failure."""
    import verl.trainer.main_ppo as verl_main_ppo

    from reinforce_ada.integrations.verl import main_ppo

    monkeypatch.setattr(verl_main_ppo, "run_ppo", lambda *a, **k: pytest.fail("Ray was reached"))
    return main_ppo.run


@pytest.mark.fault("verl Est: +algorithm.reinforce_ada.memory.seed= a missing file, a line that is not JSON, "
                   "num_samples -2",
                   "ConfigError naming the key, file:line and the field, before Ray starts (the DataError came "
                   "inside Ray, after the workers started)")
@pytest.mark.parametrize("content, message", [
    (None, r"pass-rate file .*missing.jsonl does not exist"),
    ('{"key": "k", "pass_rate": 0.5, "num_samples": 8}\nnot json\n', r"seed.jsonl:2: not a JSON object"),
    ('{"key": "k", "pass_rate": 0.5, "num_samples": -2}\n', r"seed.jsonl:1: num_samples must be a positive finite"),
])
def test_v1_est_a_bad_memory_seed_file_is_refused_before_ray(est_trainer_config, tmp_path, monkeypatch, content,
                                                             message):
    """`+algorithm.reinforce_ada.memory.seed=...`: the DataError came only when the manager was built inside Ray."""
    seed = tmp_path / ("missing.jsonl" if content is None else "seed.jsonl")
    if content is not None:
        seed.write_text(content)
    cfg = _config(est_trainer_config, tmp_path, **{"algorithm.reinforce_ada.memory": {"seed": str(seed)}})
    with pytest.raises(ConfigError, match=r"^algorithm\.reinforce_ada\.memory\.seed: .*" + message):
        _before_ray(monkeypatch)(cfg)


@pytest.mark.fault("verl Est: trainer.resume_mode=auto or resume_path, the global_step_N folder without "
                   "reinforce_ada_est.json, or with one cut short or without its memory",
                   "CheckpointError naming the file and trainer.resume_mode=disable, before Ray starts (inside "
                   "Ray, after verl loaded the actor; a truncated file was a JSONDecodeError naming none)")
@pytest.mark.parametrize("damage", ["missing", "truncated", "no memory"])
@pytest.mark.parametrize("resume_mode", ["auto", "resume_path"])
def test_v1_est_the_resume_folders_state_is_checked_before_ray_naming_the_file(est_trainer_config, tmp_path,
                                                                               verl_dispatch, monkeypatch, damage,
                                                                               resume_mode):
    """The folder verl will resume from (the newest global_step_N, or trainer.resume_from_path) without Est's file,
    or with one cut short (a JSONDecodeError inside Ray that named no file) or without its memory."""
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    cfg = _config(est_trainer_config, tmp_path)
    _verl_step(_manager(cfg), cfg, 1, _script(), dict.fromkeys(PROMPTS, 0))
    PPOTrainer._save_checkpoint(_verl_trainer(cfg, step=1))
    path = tmp_path / "global_step_1" / "reinforce_ada_est.json"
    text = path.read_text()
    if damage == "missing":
        path.unlink()
    else:
        path.write_text(text[: len(text) // 2] if damage == "truncated" else '{"version": 1, "pending": {}}')
    message = {"missing": "holds no reinforce_ada_est.json.*trainer.resume_mode=disable",
               "truncated": re.escape(str(path)) + r": Est's state cannot be read \(",
               "no memory": re.escape(str(path)) + r": Est's state cannot be read \(no 'memory'\)"}[damage]
    updates = {"trainer.resume_mode": resume_mode}
    if resume_mode == "resume_path":
        updates["trainer.resume_from_path"] = str(tmp_path / "global_step_1")
    with pytest.raises(CheckpointError, match=message):
        _before_ray(monkeypatch)(_config(cfg, **updates))


@pytest.mark.fault("verl: trainer.resume_mode=bogus, resume_path without a global_step_N resume_from_path, or one "
                   "that does not exist",
                   "ConfigError / CheckpointError naming the key, before Ray starts (it reached Ray)")
@pytest.mark.parametrize("updates, message", [
    ({"trainer.resume_mode": "bogus"}, r"^trainer.resume_mode='bogus': verl knows auto, disable, resume_path"),
    ({"trainer.resume_mode": "resume_path"}, r"^trainer.resume_mode=resume_path needs trainer.resume_from_path"),
    ({"trainer.resume_mode": "resume_path", "trainer.resume_from_path": "/nowhere/global_step_3"},
     r"verl resumes from /nowhere/global_step_3, which does not exist"),
])
def test_v1_est_a_bad_resume_mode_is_refused_before_ray(est_trainer_config, tmp_path, monkeypatch, updates, message):
    with pytest.raises((ConfigError, CheckpointError), match=message):
        _before_ray(monkeypatch)(_config(est_trainer_config, tmp_path, **updates))


def test_v1_est_memory_is_seeded_from_a_select_prompts_file(est_trainer_config, tmp_path, verl_dispatch):
    seed = tmp_path / "pass_rates.jsonl"
    seed.write_text(json.dumps({"key": _key("a"), "pass_rate": 0.0, "num_samples": 16}) + "\n")
    cfg = _config(est_trainer_config, tmp_path, **{"algorithm.reinforce_ada.memory": {"seed": str(seed)}})
    manager = _manager(cfg)
    manager.generate_sequences(_batch(list("abcd"), step=1))
    counts = [a.num_samples for a in manager.est.pending.values()]
    assert counts[0] > max(counts[1:]) and sum(counts) == 32  # the seeded hard prompt gets more from step 1


def test_v1_est_metrics_are_written_next_to_the_checkpoints(est_trainer_config, tmp_path, verl_dispatch):
    cfg = _config(est_trainer_config, tmp_path)
    manager = _manager(cfg)
    _verl_step(manager, cfg, 1, _script(), dict.fromkeys(PROMPTS, 0))
    lines = [json.loads(line) for line in open(tmp_path / "reinforce_ada_est_metrics.jsonl")]
    assert [line["event"] for line in lines] == ["allocate", "advantage"] and {line["step"] for line in lines} == {1}
    assert lines[0]["reinforce_ada_est/alloc_total"] == 32 and lines[0]["reinforce_ada_est/budget"] == 32
    assert lines[1]["reinforce_ada_est/memory_prompts"] == 4 and lines[1]["reinforce_ada_est/pending_prompts"] == 0
    assert 1.0 <= lines[1]["reinforce_ada_est/grad_weight_max"] <= 8.0


# -- the entry point ------------------------------------------------------------------------------------------------
def test_v1_est_main_ppo_runs_verls_task_runner_v1(est_trainer_config, monkeypatch):
    import ray
    import verl.trainer.main_ppo as verl_main_ppo

    from reinforce_ada.integrations.verl import main_ppo

    captured = {}
    monkeypatch.setattr(verl_main_ppo, "run_ppo", lambda config, task_runner_class: captured.update(
        config=config, runner=task_runner_class))
    main_ppo.main(est_trainer_config)
    runner_class = captured["runner"].__ray_metadata__.modified_class.__ray_actor_class__
    assert runner_class is main_ppo.ReinforceAdaEstTaskRunner
    assert issubclass(runner_class, main_ppo._plain_class(verl_main_ppo.TaskRunnerV1))
    assert not ray.is_initialized()
    calls = []
    monkeypatch.setattr(runner_class.__mro__[1], "run", lambda self, config: calls.append(config))
    runner_class().run(est_trainer_config)
    assert calls == [est_trainer_config]
    with pytest.raises(ConfigError, match="rollout.n"):
        runner_class().run(_config(est_trainer_config, **{"actor_rollout_ref.rollout.n": 4}))
    assert len(calls) == 1


# -- the example ----------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_v1_est_example_script_composes_and_passes_the_checks():  # runs `python -m ...main_ppo --cfg job` (hydra)
    import subprocess

    examples = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "verl")
    root = os.path.abspath(os.path.join(examples, "..", ".."))
    env = {**os.environ, "MODEL_PATH": "/models/none",
           "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    shown = subprocess.run(["bash", os.path.join(examples, "run_reinforce_ada_est.sh"), "--cfg", "job"],
                           capture_output=True, text=True, env=env, timeout=300)
    assert shown.returncode == 0, shown.stderr[-2000:]
    cfg = OmegaConf.create(shown.stdout)
    sampler = check_verl_config(cfg)
    assert (sampler.mode, sampler.objective_in_use, sampler.sample_share_in_use, sampler.max_grad_weight) == (
        "est", "log", 0.5, 8.0)
    assert (sampler.est.samples_per_prompt, sampler.est.min_samples, sampler.est.max_samples) == (8, 2, 32)
    assert cfg.trainer.use_v1 is True and cfg.actor_rollout_ref.rollout.n == 8
    assert cfg.data.train_batch_size == 512 and cfg.actor_rollout_ref.actor.ppo_mini_batch_size == 128
    actor = cfg.actor_rollout_ref.actor
    assert (actor.clip_ratio_low, actor.clip_ratio_high, actor.loss_agg_mode) == (0.2, 0.28, "token-mean")


def _gpu_check_module():
    import importlib.util

    path = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "verl", "gpu_check.py")
    spec = importlib.util.spec_from_file_location("gpu_check", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_v1_est_gpu_check_dry_run_builds_a_valid_v1_est_run(tmp_path):
    import subprocess
    import sys

    examples = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "verl")
    root = os.path.abspath(os.path.join(examples, "..", ".."))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, os.path.join(examples, "gpu_check.py"), "--est", "--dry-run", "--workdir",
                           str(tmp_path)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "DRY RUN OK" in done.stderr and '"mode": "est"' in done.stderr


def test_v1_est_gpu_check_reads_the_est_records(tmp_path):
    gpu_check = _gpu_check_module()
    checkpoints = tmp_path / "checkpoints"
    (checkpoints / "global_step_2").mkdir(parents=True)
    total = gpu_check.N * gpu_check.NUM_PROMPTS
    events = [{"event": event, "step": step, "reinforce_ada_est/alloc_total": total}
              for step in (1, 2) for event in ("allocate", "advantage")]
    (checkpoints / "reinforce_ada_est_metrics.jsonl").write_text("\n".join(json.dumps(e) for e in events))
    (checkpoints / "global_step_2" / "reinforce_ada_est.json").write_text("{}")
    assert gpu_check.check_est_run(tmp_path) == []
    (checkpoints / "global_step_2" / "reinforce_ada_est.json").unlink()
    events[2]["reinforce_ada_est/alloc_total"] = total - 1
    (checkpoints / "reinforce_ada_est_metrics.jsonl").write_text("\n".join(json.dumps(e) for e in events[:3]))
    problems = gpu_check.check_est_run(tmp_path)
    assert problems == [f"step 2 did not allocate {gpu_check.N} x {gpu_check.NUM_PROMPTS} samples",
                        "no Est advantage (memory update) for step 2",
                        f"{checkpoints / 'global_step_2' / 'reinforce_ada_est.json'} was not written"]
