"""``selection="all"`` through the trainer: a step's update sees every generated sample, not ``n`` per prompt."""

import json

from reinforce_ada.models import build_char_tokenizer, build_tiny_model
from reinforce_ada.training import Trainer
from reinforce_ada.training.update import PolicyUpdate
from trainer_fixtures import addition_prompts, digit_verifier, small_config


def run_two_steps(folder, selection, monkeypatch):
    # pools of M=8 (one round) against groups of n=4: the default rules keep half of every pool
    trainer = Trainer(small_config(folder, strategy="ada-balanced",
                                   sampler=dict(samples_per_round=8, max_rounds=1, selection=selection,
                                                importance_weights=True)),
                      model=build_tiny_model(seed=0), tokenizer=build_char_tokenizer(),
                      train_prompts=addition_prompts(8, 1), eval_prompts=addition_prompts(8, 2),
                      verifier=digit_verifier)
    batches, updates = [], []
    sample, update = trainer.sampler.sample, PolicyUpdate.__call__

    def recording_sample(prompts):
        batches.append(sample(prompts))
        return batches[-1]

    def recording_update(self, seq, step):
        updates.append(seq)
        return update(self, seq, step)

    trainer.sampler.sample = recording_sample
    monkeypatch.setattr(PolicyUpdate, "__call__", recording_update)
    trainer.train()
    records = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    return batches, updates, [r for r in records if "train/num_sequences" in r]


def test_a_step_trains_on_every_pool_sample(tmp_path, monkeypatch):
    batches, updates, records = run_two_steps(tmp_path / "all", "all", monkeypatch)
    assert len(batches) == len(updates) == len(records) == 2
    for batch, seq, record in zip(batches, updates, records):
        pooled = [c for pool in batch.pools.values() for c in pool.completions]
        assert len(pooled) == 4 * 8 == record["sampling/total_samples"]
        assert [c for g in batch.groups for c in g.completions] == [c for g in batch.groups
                                                                    for c in batch.pools[g.prompt_id].completions]
        assert seq.num_sequences == sum(1 for c in pooled if c.token_ids) == record["train/num_sequences"]
        assert seq.weights.tolist() == [1.0] * seq.num_sequences  # nothing to undo: no downsampling
    # the same run with the default rule trains on n=4 of each pool of 8
    _, updates, _ = run_two_steps(tmp_path / "balanced", "balanced", monkeypatch)
    assert all(seq.num_sequences <= 4 * 4 for seq in updates)
