"""Reinforce-Ada-Est in verl's asynchronous v1 trainer modes (``trainer.v1.trainer_mode`` ``colocate_async`` and
``separate_async``), run through verl's own trainer on the CPU.

What runs is verl's: the trainer class of the mode (``PPOTrainerColocateAsync`` / ``PPOTrainerSeparateAsync``) and
its ``fit`` loop -- the async warm-up (``_add_async_warmup_batches``), every step's submission (``prepare_step`` ->
``_next_train_batch`` -> ``_submit_batch_to_rollout``), the replay buffer (``ReplayBufferAsync``: its staleness rule,
its eviction of failed groups and its refills through ``_add_prompts_to_generate``), separate_async's mini-batches
(``parameter_sync_step``), ``_balance_batch``'s padding rows, ``_compute_advantage`` with the registered
``reinforce_ada_est`` estimator, ``_save_checkpoint`` / ``_load_checkpoint`` with TransferQueue's checkpoint and
``_reissue_inflight_prompts`` on resume, ``_compute_metrics``; verl's ``AgentLoopManagerTQ`` / ``AgentLoopWorkerTQ``
(``_run_prompt`` reading ``__rollout_n__``, ``_agent_loop_postprocess`` storing the trajectories) and verl's
dataloader code (``_init_dataloader``, ``StatefulDataLoader``, ``collate_fn``, ``create_rl_sampler``).

Replaced: Ray (``ray.get`` over finished calls, one driver process), TransferQueue's Ray-backed store (an
in-process store with its KV interface, :class:`_TransferQueue`), the engines (the agent loop itself: a session
returns a scripted reward once the engine's clock reaches its ready step, :class:`_Engine`; the weight-sync managers,
whose update at the end of each step advances that clock; the replay buffer's sleep between polls,
``_wait_for_next_poll``, advances it instead of the wall clock), the workers (the actor's ``compute_log_prob`` /
``update_actor`` / checkpoint calls, :class:`_ActorWorkers`), and the tokenizer (``create_rl_dataset`` gives the rows
verl's ``RLHFDataset`` yields for chat prompts, :class:`_Rows`). Which path submitted a batch is read from the call
stack (:func:`_path`); nothing of verl's is wrapped for it.

The checks are relational: every allocation is replayed against a memory rebuilt independently from the groups the
actor was handed (once each, in order), so they hold whatever order verl's replay buffer picks among groups of the
same step. Every test's name carries ``v1``, ``est`` and ``async``, and its mode in the name or the parameter
(``pytest -k "v1 and est and async"``).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections import defaultdict
from types import SimpleNamespace
from unittest import mock

import numpy as np
import pytest

pytest.importorskip("verl")
transfer_queue = pytest.importorskip("transfer_queue")  # the v1 trainer's import; in the verl extra (docs/verl.md)

import torch  # noqa: E402

from reinforce_ada.integrations.verl.config import EST_CONFIG_NAME, compose_trainer_config  # noqa: E402

PASS_RATES = {"a": 0.05, "b": 0.3, "c": 0.7, "d": 1.0}  # prompt id -> pass rate of its scripted rewards
NUM_ROWS = 64  # dataset rows: prompt ids a, b, c, d repeating (row i is prompt list(PASS_RATES)[i % 4])
BATCH = 4  # data.train_batch_size
MODES = {
    "colocate_async": ["trainer.v1.colocate_async.num_warmup_batches=1.5"],
    "separate_async": ["trainer.v1.separate_async.parameter_sync_step=2",
                       "actor_rollout_ref.actor.ppo_mini_batch_size=2",  # x 2 = train_batch_size, as verl requires
                       "actor_rollout_ref.rollout.nnodes=1", "actor_rollout_ref.rollout.n_gpus_per_node=1",
                       "actor_rollout_ref.rollout.checkpoint_engine.backend=nccl"],
}


def _config(mode, tmp_path, *extra):
    return compose_trainer_config([
        "actor_rollout_ref.model.path=/models/none",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        f"data.train_batch_size={BATCH}",
        "data.dataloader_num_workers=0",
        "trainer.n_gpus_per_node=1",
        "trainer.logger=[]",
        "trainer.val_before_train=false",
        "trainer.total_training_steps=8",
        f"trainer.default_local_dir={tmp_path}",
        "trainer.v1.sampler.max_off_policy_threshold=3",
        f"trainer.v1.trainer_mode={mode}",
        *MODES[mode],
        *extra,
    ], config_name=EST_CONFIG_NAME)


# -- the stand-ins ---------------------------------------------------------------------------------------------------
class _TransferQueue:
    """TransferQueue's KV interface (``kv_*``, ``async_kv_put`` / ``async_kv_batch_put``, checkpoints) over a dict in
    this process, with its semantics: a put merges tags and fields into the key's (creating it), a get returns the
    selected fields present, a field whose samples ever differed in shape comes back nested (jagged), a clear drops
    the keys."""

    NAMES = ("kv_batch_put", "kv_batch_get", "kv_list", "kv_clear", "async_kv_put", "async_kv_batch_put",
             "save_checkpoint", "load_checkpoint")

    def __init__(self):
        self.partitions: dict[str, dict[str, dict]] = defaultdict(dict)  # partition -> key -> {"tag", "fields"}
        self.nested: dict[str, set[str]] = defaultdict(set)  # partition -> fields stored nested

    def install(self, monkeypatch):
        for name in self.NAMES:
            monkeypatch.setattr(transfer_queue, name, getattr(self, name))

    @staticmethod
    def _rows(fields):
        rows = [fields[i] for i in range(len(fields))]
        return [{key: row[key] for key in row.keys()} for row in rows]

    def kv_batch_put(self, keys, partition_id, fields=None, tags=None, data_parser=None):
        from transfer_queue import KVBatchMeta

        if fields is None and tags is None:
            raise ValueError("Please provide at least one parameter of fields or tags.")
        partition = self.partitions[partition_id]
        rows = self._rows(fields) if fields is not None else [{}] * len(keys)
        for i, key in enumerate(keys):
            entry = partition.setdefault(key, {"tag": {}, "fields": {}})
            if tags is not None:
                entry["tag"].update(tags[i])
            entry["fields"].update(rows[i])
        if fields is not None:
            for name in fields.keys():
                value = fields.get(name)
                shapes = {tuple(e["fields"][name].shape) for e in partition.values()
                          if isinstance(e["fields"].get(name), torch.Tensor)}
                if (isinstance(value, torch.Tensor) and value.is_nested) or len(shapes) > 1:
                    self.nested[partition_id].add(name)
        return KVBatchMeta(keys=list(keys), tags=[dict(partition[k]["tag"]) for k in keys],
                           partition_id=partition_id, fields=sorted(partition[keys[0]]["fields"]) if keys else [])

    async def async_kv_batch_put(self, keys, partition_id, fields=None, tags=None, data_parser=None):
        return self.kv_batch_put(keys, partition_id, fields=fields, tags=tags)

    async def async_kv_put(self, key, partition_id, fields=None, tag=None, data_parser=None):
        return self.kv_batch_put([key], partition_id, fields=fields, tags=None if tag is None else [tag])

    def kv_batch_get(self, keys, partition_id, select_fields=None):
        from verl.utils.tensordict_utils import list_of_dict_to_tensordict

        keys = [keys] if isinstance(keys, str) else list(keys)
        partition = self.partitions[partition_id]
        missing = [k for k in keys if k not in partition]
        if missing:
            raise ValueError(f"keys or partition were not found: {missing[:3]}")
        names = set(partition[keys[0]]["fields"])
        if select_fields is not None:
            names &= {select_fields} if isinstance(select_fields, str) else set(select_fields)
        rows = [{name: partition[k]["fields"][name] for name in sorted(names)} for k in keys]
        data = list_of_dict_to_tensordict(rows)
        for name in names & self.nested[partition_id]:
            value = data.get(name)
            if isinstance(value, torch.Tensor) and not value.is_nested:
                data[name] = torch.nested.as_nested_tensor(list(value.unbind(0)), layout=torch.jagged)
        return data

    def kv_list(self, partition_id=None):
        wanted = [partition_id] if partition_id is not None else list(self.partitions)
        return {pid: {k: dict(e["tag"]) for k, e in self.partitions[pid].items()} for pid in wanted
                if self.partitions.get(pid)}

    def kv_clear(self, keys, partition_id):
        for key in [keys] if isinstance(keys, str) else keys:
            self.partitions[partition_id].pop(key, None)

    def save_checkpoint(self, checkpoint_dir, *, include_storage=True, metadata=None):
        os.makedirs(checkpoint_dir, exist_ok=True)
        torch.save({"partitions": dict(self.partitions), "nested": dict(self.nested)},
                   os.path.join(checkpoint_dir, "kv.pt"))

    def load_checkpoint(self, checkpoint_dir):
        state = torch.load(os.path.join(checkpoint_dir, "kv.pt"), weights_only=False)
        self.partitions = defaultdict(dict, state["partitions"])
        self.nested = defaultdict(set, state["nested"])

    def status(self, uid, partition_id="train"):
        entry = self.partitions[partition_id].get(uid)
        return None if entry is None else entry["tag"].get("status")


def _reward(index, session):
    """The scripted reward of dataset row ``index``'s ``session``-th sample: the same in every run."""
    rate = PASS_RATES[list(PASS_RATES)[index % len(PASS_RATES)]]
    return float(np.random.default_rng([index, session]).random() < rate)


class _Engine:
    """The rollout engine behind verl's ``AgentLoopWorkerTQ``: the workers' coroutines run on one event loop; each
    session waits until the test's clock reaches its group's ready step (the step the prompt was submitted at, plus
    ``delays[k]`` for the ``k``-th prompt handed to the engine), then returns its scripted reward to verl's
    ``_agent_loop_postprocess``, which stores the trajectory. The ``k``-th prompt for ``k`` in ``failing`` raises in
    its first session (verl marks the group ``failure``)."""

    def __init__(self, config, store, delays=None, failing=()):
        self.config, self.store = config, store
        self.delays, self.failing = dict(delays or {}), set(failing)
        self.loop = asyncio.new_event_loop()
        self.waiting: list[tuple[int, str, asyncio.Future]] = []
        self.groups: dict[str, dict] = {}  # uid -> index, submitted step, sessions started
        self.rewards: dict[str, float] = {}  # trajectory key -> reward

    def worker(self):
        from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopWorkerTQ

        from reinforce_ada.integrations.verl.main_ppo import _plain_class

        worker = object.__new__(_plain_class(AgentLoopWorkerTQ))
        worker.config, worker.background_tasks = self.config, set()
        worker.processor, worker.reward_loop_worker_handles, worker.distillation_enabled = None, None, False
        worker._run_agent_loop = lambda params, trajectory, **kw: self._session(worker, trajectory, **kw)
        engine = self

        class Handle:  # the Ray actor handle the manager dispatches to: worker.generate_sequences.remote(chunk)
            class generate_sequences:  # noqa: N801
                @staticmethod
                def remote(chunk):
                    engine._dispatch(worker, chunk)

        return Handle()

    async def _session(self, worker, trajectory, *, agent_name, trace, session_id, **prompt):
        """What ``AgentLoopWorker._run_agent_loop`` does -- run the agent loop against the engine, then verl's
        ``_agent_loop_postprocess`` -- with the loop and the engine replaced by the script."""
        from verl.experimental.agent_loop.agent_loop import AgentLoopMetrics, AgentLoopOutput

        uid, index, submitted = str(prompt["uid"]), int(prompt["index"]), int(prompt["global_steps"])
        group = self.groups.setdefault(uid, {"index": index, "submitted": submitted, "sessions": 0,
                                             "ordinal": len(self.groups)})
        group["sessions"] += 1
        future = self.loop.create_future()
        self.waiting.append((submitted + self.delays.get(group["ordinal"], 0), uid, future))
        finished = await future
        if group["ordinal"] in self.failing and session_id == 0:
            raise RuntimeError(f"scripted failure of row {index}")
        reward = _reward(index, session_id)
        self.rewards[f"{uid}_{session_id}_0"] = reward
        length = 2 + (index + session_id) % 4
        output = AgentLoopOutput(prompt_ids=[5] * (3 + index % 3), response_ids=[7] * length,
                                 response_mask=[1] * length, response_logprobs=[-0.5] * length, reward_score=reward,
                                 num_turns=2, metrics=AgentLoopMetrics(),
                                 extra_fields={"min_global_steps": submitted, "max_global_steps": finished})
        await worker._agent_loop_postprocess(output, trajectory["validate"], session_id=session_id, **prompt)

    def _dispatch(self, worker, chunk):
        from verl.utils import tensordict_utils as tu

        self.loop.run_until_complete(worker.generate_sequences(chunk))
        expected = dict(zip([str(u) for u in tu.get(chunk, "uid")], tu.get(chunk, "__rollout_n__") or []))
        self._settle(lambda: all(self.groups.get(uid, {}).get("sessions") == n for uid, n in expected.items()))

    def tick(self, step):
        """The engine has run until the trainer's ``step``: every session whose group is ready finishes."""
        ready = [(uid, future) for when, uid, future in self.waiting if when <= step]
        self.waiting = [w for w in self.waiting if w[0] > step]
        for _, future in ready:
            future.set_result(step)
        uids = {uid for uid, _ in ready}
        self._settle(lambda: all(self.store.status(uid) in ("finished", "failure") for uid in uids))

    def _settle(self, done):
        for _ in range(10_000):
            if done():
                return
            self.loop.run_until_complete(asyncio.sleep(0))
        raise AssertionError("the engine's coroutines did not settle")


class _ActorWorkers:
    """The actor worker group, as far as the trainer calls it: log-probs written back to TransferQueue as a worker
    writes them, and each ``update_actor`` recorded with the step and the rows it was handed."""

    _dispatch_info = {"actor": [0]}  # one data-parallel rank

    def __init__(self, store, events, clock):
        self.store, self.events, self.clock = store, events, clock

    def compute_log_prob(self, batch):
        data = self.store.kv_batch_get(batch.keys, batch.partition_id, ["input_ids"])
        zeros = [torch.zeros(len(ids), dtype=torch.float32) for ids in data["input_ids"].unbind(0)]
        nested = torch.nested.as_nested_tensor(zeros, layout=torch.jagged)
        from tensordict import TensorDict

        self.store.kv_batch_put(batch.keys, batch.partition_id,
                                fields=TensorDict({"log_probs": nested, "entropy": nested.clone()},
                                                  batch_size=len(batch)))
        return batch

    def update_actor(self, batch):
        data = self.store.kv_batch_get(batch.keys, batch.partition_id, ["advantages"])
        advantages = [float(a[0]) for a in data["advantages"].unbind(0)]
        self.events.append({"event": "update", "step": self.clock(), "keys": list(batch.keys),
                            "padding": [bool(t.get("is_padding", False)) for t in batch.tags],
                            "advantages": advantages})
        return {"metrics": {"mfu": [0.0]}}

    def save_checkpoint(self, *args, **kwargs):
        pass

    def load_checkpoint(self, *args, **kwargs):
        pass

    # separate_async's DetachActorWorker keeps pi_old on the CPU across a parameter_sync_step cycle
    def save_model_to_cpu(self, slot):
        pass

    def restore_model_from_cpu(self, slot):
        pass

    def clear_cpu_model(self, slot):
        pass


class _WeightSync:
    """A checkpoint-engine manager: a weight update ends a step, and the engine has generated meanwhile."""

    def __init__(self, engine):
        self.engine = engine

    def update_weights(self, step):
        self.engine.tick(step)
        return {}

    def __getattr__(self, name):  # abort / sleep / resume the replicas: nothing to do without an engine
        return lambda *args, **kwargs: None


class _Rows(torch.utils.data.Dataset):
    """What verl's ``RLHFDataset`` yields for a chat prompt: the rows of :data:`NUM_ROWS`."""

    def __len__(self):
        return NUM_ROWS

    def __getitem__(self, index):
        pid = list(PASS_RATES)[index % len(PASS_RATES)]
        return {"data_source": "scripted", "raw_prompt": [{"role": "user", "content": f"prompt {pid}"}],
                "reward_model": {"ground_truth": "1", "style": "rule"}, "extra_info": {"index": index},
                "index": index, "tools_kwargs": {}, "interaction_kwargs": {},
                "dummy_tensor": torch.tensor([0], dtype=torch.uint8)}


def _json(state):
    return json.loads(json.dumps(state))


_LABELS = {"_reissue_inflight_prompts": "re-issue", "wait_for_sampleable": "refill",
           "_add_async_warmup_batches": "warm-up", "prepare_step": "step"}


def _path():
    """Which of verl's submission paths called the manager: the innermost of its functions on the stack."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name in _LABELS:
            return _LABELS[frame.f_code.co_name]
        frame = frame.f_back
    return "other"


class _Run:
    """One verl trainer of the config's mode, built as ``TaskRunnerV1.run`` builds it (trainer, its checkpoint
    loaded, then the manager), with the stand-ins above; :meth:`fit` runs verl's ``fit``."""

    def __init__(self, config, monkeypatch, delays=None, failing=()):
        import ray
        from verl.trainer.ppo.v1 import get_trainer_cls, trainer_base

        from reinforce_ada.integrations.verl.agent_loop_v1 import ReinforceAdaEstAgentLoopManager

        self.config = config
        self.store = _TransferQueue()
        self.store.install(monkeypatch)
        monkeypatch.setattr(ray, "get", lambda refs: refs)
        monkeypatch.setattr(trainer_base, "create_rl_dataset", lambda *args, **kwargs: _Rows())
        self.events: list[dict] = []
        trainer = self.trainer = get_trainer_cls(config.trainer.v1.trainer_mode)(config=config)
        clock = lambda: trainer.global_steps  # noqa: E731
        self.engine = _Engine(config, self.store, delays, failing)
        trainer.tokenizer, trainer.processor = SimpleNamespace(eos_token_id=2), None
        trainer._init_dataloader()
        trainer._init_dump_executor()
        trainer.resource_pool_manager = SimpleNamespace(get_n_gpus=lambda: 1)
        trainer.reward_loop_manager = SimpleNamespace(reward_loop_worker_handles=[])  # rewards scored in the loop
        trainer.actor_rollout_wg = _ActorWorkers(self.store, self.events, clock)
        trainer.checkpoint_manager = _WeightSync(self.engine)
        if config.trainer.v1.trainer_mode == "separate_async":
            from verl.trainer.ppo.v1.trainer_separate_async import HybridEngineMode

            trainer.standalone_checkpoint_manager = _WeightSync(self.engine)
            trainer.llm_server_manager = trainer.standalone_server_manager = mock.MagicMock()
            trainer.current_mode = HybridEngineMode.ROLLOUT  # as _setup leaves it
        trainer.replay_buffer._wait_for_next_poll = lambda partition_id, last: self.engine.tick(clock()) or last
        trainer._load_checkpoint()
        manager = self.manager = ReinforceAdaEstAgentLoopManager(config, llm_client=None)
        manager.agent_loop_workers = [self.engine.worker(), self.engine.worker()]
        dispatch = manager.generate_sequences

        def recorded(prompts):
            from verl.utils import tensordict_utils as tu

            memory = _json(manager.est.memory.state_dict())
            dispatch(prompts)
            self.events.append({"event": "allocate", "path": _path(), "step": trainer.global_steps,
                                "uids": [str(u) for u in tu.get(prompts, "uid")],
                                "index": [int(i) for i in tu.get(prompts, "index")],
                                "counts": [int(n) for n in tu.get(prompts, "__rollout_n__")],
                                "memory": memory})

        manager.generate_sequences = recorded

    def fit(self):
        self.trainer.fit(self.manager)

    def metrics(self):
        path = os.path.join(self.config.trainer.default_local_dir, "reinforce_ada_est_metrics.jsonl")
        return [json.loads(line) for line in open(path)]


# -- the replay: every allocation and every memory update, checked against an independent memory --------------------
def _prompt(index):
    from reinforce_ada.types import Prompt

    pid = list(PASS_RATES)[index % len(PASS_RATES)]
    return Prompt(str(index), [{"role": "user", "content": f"prompt {pid}"}], answer="1")


def _replay(run, memory_state=None, pending=None, rewards=None):
    """Walk the run's events in order next to a memory of our own, built from the groups the actor was handed (each
    group's visit once, when its mini-batch is trained, in the order the estimator applies a call's visits: by uid).

    Checked at each allocation: the driver's memory equals ours (it allocates from the memory as it stands), the
    counts of the prompts not yet allocated are ``est_allocation`` of ours over exactly those prompts, summing to
    ``8 x`` their number whatever the call's size, and a uid dispatched again keeps its count; verl's worker started
    that many sessions. At each update: every group is one this driver allocated, trained for the first time, with
    all its sessions in this one mini-batch, and its advantages are ``w_grad(rbar) (r - rbar)`` over all its rows.
    At the end the driver's memory equals ours. ``memory_state`` / ``pending``: where a resumed run starts;
    ``rewards``: the rewards of the groups it restored finished (drawn before the checkpoint).

    Returns the allocations ``{uid: {key, count, step, path}}`` and the trained groups ``{uid: (step, lag)}``."""
    from reinforce_ada.sampling.estimate import est_allocation, est_memory, remember_visits
    from reinforce_ada.sampling.memory import prompt_key

    config = run.manager.est.config
    memory = est_memory(config)
    if memory_state is not None:
        memory.load_state_dict(memory_state)
    allocations = {uid: {"key": a.key, "count": a.num_samples, "step": a.step, "path": "checkpoint"}
                   for uid, a in (pending or {}).items()}
    trained: dict[str, tuple[int, int]] = {}
    rewards_of = {**(rewards or {}), **run.engine.rewards}
    for event in run.events:
        if event["event"] == "allocate":
            assert event["memory"] == _json(memory.state_dict()), f"{event['path']} at step {event['step']}"
            fresh = [i for i, uid in enumerate(event["uids"]) if uid not in allocations]
            if fresh:
                counts, _, budget = est_allocation(memory, [_prompt(event["index"][i]) for i in fresh], config)
                assert [event["counts"][i] for i in fresh] == counts.tolist()
                assert budget == counts.sum() == 8 * len(fresh)
            for i, uid in enumerate(event["uids"]):
                if uid in allocations:
                    assert event["counts"][i] == allocations[uid]["count"], "a uid dispatched again keeps its count"
                else:
                    allocations[uid] = {"key": prompt_key(_prompt(event["index"][i])), "count": event["counts"][i],
                                        "step": event["step"], "path": event["path"]}
                assert run.engine.groups[uid]["sessions"] == event["counts"][i]
            continue
        rows: dict[str, dict[int, float]] = defaultdict(dict)  # uid -> session -> advantage
        for key, padding, advantage in zip(event["keys"], event["padding"], event["advantages"]):
            if not padding:
                uid, session, _ = key.rsplit("_", 2)
                rows[uid][int(session)] = advantage
        assert len(event["keys"]) % (8 * run.config.actor_rollout_ref.actor.ppo_mini_batch_size) == 0  # verl pads
        keys, positives, negatives = [], [], []
        for uid in sorted(rows):
            allocation = allocations[uid]
            assert uid not in trained, f"group {uid} trained twice"
            assert sorted(rows[uid]) == list(range(allocation["count"])), "a group's rows all in one mini-batch"
            rewards = np.array([rewards_of[f"{uid}_{s}_0"] for s in range(allocation["count"])])
            rbar = rewards.mean()
            expected = min(1 / np.sqrt(rbar + 1e-6), 8.0) * (rewards - rbar)  # log objective, sample_share 1/2
            np.testing.assert_allclose([rows[uid][s] for s in range(allocation["count"])], expected, rtol=1e-5,
                                       atol=1e-6)
            keys.append(allocation["key"])
            positives.append(float((rewards > 0.5).sum()))
            negatives.append(float((rewards <= 0.5).sum()))
            trained[uid] = (event["step"], event["step"] - allocation["step"])
        remember_visits(memory, keys, positives, negatives)
    assert _json(run.manager.est.memory.state_dict()) == _json(memory.state_dict())
    return allocations, trained


# -- the tests -------------------------------------------------------------------------------------------------------
SLOW, STALE, FAILING = 10, 11, 12  # the engine's 10th prompt takes one step more, the 11th three, the 12th fails
WARMUP = {"colocate_async": 6, "separate_async": 4}  # num_warmup_batches x train_batch_size prompts


@pytest.fixture(scope="module", params=list(MODES))
def async_run(request, tmp_path_factory):
    """One 8-step run of the mode through verl's ``fit``, with its replay (see :func:`_replay`)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        run = _Run(_config(request.param, tmp_path_factory.mktemp(request.param)), monkeypatch,
                   delays={SLOW: 1, STALE: 3}, failing={FAILING})
        run.fit()
        run.allocations, run.trained = _replay(run)
        yield run


def _uid(run, ordinal):
    return next(uid for uid, group in run.engine.groups.items() if group["ordinal"] == ordinal)


@pytest.mark.parametrize("mode", list(MODES))
def test_v1_est_async_modes_pass_the_checks_verls_validation_and_build_verls_trainer(mode, tmp_path):
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.trainer.ppo.v1 import get_trainer_cls
    from verl.utils.config import validate_config

    from reinforce_ada.integrations.verl.config import check_verl_config

    cfg = _config(mode, tmp_path)
    assert check_verl_config(cfg).mode == "est"
    validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    trainer = get_trainer_cls(mode)(config=cfg)  # separate_async's own checks run in its __init__
    assert type(trainer.replay_buffer).__name__ == "ReplayBufferAsync"


def test_v1_est_async_every_submission_path_allocates_from_the_memory_as_it_stands(async_run):
    """The replay (run by the fixture) checked every allocation against the memory rebuilt from the groups trained
    before it; here: each of verl's paths was among them, with calls of different sizes, each spending 8 per prompt."""
    calls = [e for e in async_run.events if e["event"] == "allocate"]
    sizes = defaultdict(set)
    for call in calls:
        sizes[call["path"]].add(len(call["uids"]))
        assert sum(call["counts"]) == 8 * len(call["uids"])
    mode = async_run.config.trainer.v1.trainer_mode
    assert sizes == {"warm-up": {WARMUP[mode]}, "step": {BATCH}, "refill": {1}}
    assert [c["step"] for c in calls if c["path"] == "step"] == list(range(1, 9))
    moved = [c for c in calls if c["path"] == "step" and len(set(c["counts"])) > 1]
    assert moved, "the memory moved the allocation"


def test_v1_est_async_dropped_groups_update_the_memory_not_at_all_and_are_released(async_run):
    """A group the replay buffer drops (stale by max_off_policy_threshold, or failed) never reaches the estimator:
    the memory (equal to the replay's, which never saw it) holds no visit of it, and its allocation is released at
    the next submission; a trained group's rows coming back would be refused."""
    run = async_run
    stale, failed = _uid(run, STALE), _uid(run, FAILING)
    dropped = set(run.allocations) - set(run.trained) - set(run.manager.est.pending)
    assert dropped == {stale, failed}
    assert run.store.status(stale) is None and run.store.status(failed) is None  # cleared by the replay buffer
    releases = [m for m in run.metrics() if m["event"] == "release"]
    assert sum(m["reinforce_ada_est/released_prompts"] for m in releases) == 2
    # what is still pending is what verl still holds: in flight or finished, not yet trained
    held = {key.split("_", 1)[0] for key in run.store.partitions["train"]}
    assert set(run.manager.est.pending) <= held
    assert all(run.store.status(uid) in ("pending", "running", "finished") for uid in run.manager.est.pending)
    # never twice: verl's advantage code with a trained group's rows again stops with the driver's error
    from verl import DataProto
    from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories

    from reinforce_ada.integrations.verl.est import install_driver

    install_driver(run.manager.est)
    uid = next(iter(run.trained))
    count = run.allocations[uid]["count"]
    scores = torch.zeros(count, 2)
    scores[:, -1] = torch.tensor([run.engine.rewards[f"{uid}_{s}_0"] for s in range(count)])
    data = DataProto.from_dict(tensors={"token_level_rewards": scores, "response_mask": torch.ones(count, 2)},
                               non_tensors={"uid": np.array([uid] * count, dtype=object)})
    with pytest.raises(RuntimeError, match="never allocated"):
        compute_advantage_for_multi_trajectories(
            data, batch_keys=[f"{uid}_{s}_0" for s in range(count)], adv_estimator="reinforce_ada_est",
            num_repeat=8, config=run.config.algorithm)


def test_v1_est_async_lag_between_allocation_and_update_is_reported(async_run):
    """``reinforce_ada_est/lag/*`` of each estimator call: the steps between each group's allocation and the update,
    as the actor saw them; a slow group is trained a step later, or dropped."""
    run = async_run
    updates = [e for e in run.events if e["event"] == "update"]
    reported = [m for m in run.metrics() if m["event"] == "advantage"]
    assert len(reported) == len(updates)
    for update, metrics in zip(updates, reported):
        lags = [run.trained[uid][1] for uid in {k.rsplit("_", 2)[0] for k, pad in
                                                 zip(update["keys"], update["padding"]) if not pad}]
        assert metrics["step"] == update["step"]
        assert metrics["reinforce_ada_est/prompts"] == len(lags)
        assert metrics["reinforce_ada_est/rows"] == update["padding"].count(False)
        assert (metrics["reinforce_ada_est/lag/min"], metrics["reinforce_ada_est/lag/max"]) == (min(lags), max(lags))
        assert metrics["reinforce_ada_est/lag/mean"] == pytest.approx(np.mean(lags))
    assert {lag for _, lag in run.trained.values()} >= {0, 1}  # the warm-up's first batch, then one step behind
    slow = _uid(run, SLOW)
    assert run.trained[slow][1] >= 1


@pytest.mark.parametrize("async_run", ["separate_async"], indirect=True)
def test_v1_est_async_separate_async_trains_each_mini_batch_with_whole_groups(async_run):
    """separate_async: parameter_sync_step (2) mini-batches of prompt groups per step, each advantaged on its own;
    every group's rows are all in its one mini-batch (the replay checked each group's advantage over all its rows),
    and groups allocated in one call are remembered at different mini-batches, each once."""
    run = async_run
    updates = [e for e in run.events if e["event"] == "update"]
    assert [u["step"] for u in updates] == [s for s in range(1, 9) for _ in range(2)]
    trained_in = {}
    for n, update in enumerate(updates):
        for key, pad in zip(update["keys"], update["padding"]):
            if not pad:
                trained_in[key.rsplit("_", 2)[0]] = n
    calls = [e for e in run.events if e["event"] == "allocate"]
    assert any(len({trained_in[u] for u in c["uids"] if u in trained_in}) > 1 for c in calls)
    # a refill between the two mini-batches of a step allocates from the memory with the first one's visits
    between = []
    for n, event in enumerate(run.events):
        if event["event"] == "allocate" and event["path"] == "refill":
            earlier = run.events[:n]
            step_call = next(e for e in reversed(earlier) if e["event"] == "allocate" and e["path"] == "step")
            if any(e["event"] == "update" and e["step"] == event["step"] for e in earlier):
                between.append(event["memory"] != step_call["memory"])
    assert between and all(between)
    assert all(len({k.rsplit("_", 2)[0] for k, pad in zip(u["keys"], u["padding"]) if not pad}) == 2
               for u in updates)  # ppo_mini_batch_size prompt groups


@pytest.mark.parametrize("mode", list(MODES))
def test_v1_est_async_checkpoint_with_pending_allocations_resumes_to_the_same_next_allocations(mode, tmp_path,
                                                                                              monkeypatch):
    """verl saves at step 3 while prompts are in flight (TransferQueue's checkpoint keeps them, Est's keeps their
    allocations); a run resumed there re-issues them (``_reissue_inflight_prompts``) with the counts they had, and its
    next submission is allocated exactly as the uninterrupted run's, from the same memory. The replay then holds
    after the resume too (restored groups remembered once, with their lag from the original allocation)."""
    uninterrupted = _Run(_config(mode, tmp_path / "a", "trainer.save_freq=3", "trainer.total_training_steps=6"),
                         monkeypatch, delays={SLOW: 1, STALE: 3}, failing={FAILING})
    uninterrupted.fit()
    _replay(uninterrupted)
    folder = tmp_path / "a" / "global_step_3"
    saved = json.load(open(folder / "reinforce_ada_est.json"))
    assert saved["pending"], "allocations were pending at the checkpoint"

    resumed = _Run(_config(mode, tmp_path / "b", "trainer.total_training_steps=6", "trainer.resume_mode=resume_path",
                           f"trainer.resume_from_path={folder}"), monkeypatch)
    assert resumed.trainer.global_steps == 3
    assert _json(resumed.manager.est.memory.state_dict()) == saved["memory"]
    pending = dict(resumed.manager.est.pending)
    assert {uid: [a.key, a.num_samples, a.step] for uid, a in pending.items()} == saved["pending"]
    resumed.fit()

    calls = [e for e in resumed.events if e["event"] == "allocate"]
    assert calls[0]["path"] == "re-issue" and set(calls[0]["uids"]) <= set(pending)
    assert calls[0]["counts"] == [pending[uid].num_samples for uid in calls[0]["uids"]]
    after = [e for e in uninterrupted.events if e["event"] == "allocate" and e["step"] == 4]
    resumed_step4 = [c for c in calls if c["path"] != "re-issue" and c["step"] == 4]
    assert (after[0]["path"], after[0]["index"], after[0]["counts"]) == (
        resumed_step4[0]["path"], resumed_step4[0]["index"], resumed_step4[0]["counts"])
    assert after[0]["memory"] == resumed_step4[0]["memory"] == saved["memory"]
    _, trained = _replay(resumed, memory_state=saved["memory"], pending=pending,
                         rewards=uninterrupted.engine.rewards)
    restored = [uid for uid in pending if uid in trained]
    assert restored and all(trained[uid][1] == trained[uid][0] - pending[uid].step for uid in restored)
