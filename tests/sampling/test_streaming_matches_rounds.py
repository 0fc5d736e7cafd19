"""The streaming sampler, run like the round-based one, gives the same batch.

With fixed allocation (``M`` more each time a prompt's previous ``M`` are scored), no cancellation, no idle filling
and room for every request at once, streaming draws exactly the round-based sampler's pools: each prompt's samples
come in waves of ``M``, at most ``N`` of them, and a prompt stops after the wave in which it met its exit rule. Same
pools, same seeded selection, so the same groups and advantages.
"""

from dataclasses import replace

import numpy as np
import pytest
from scripted_fakes import ScriptedGenerator, ScriptedVerifier, make_prompts

from reinforce_ada.config import SamplerConfig, StreamingConfig
from reinforce_ada.sampling.sampler import AdaptiveSampler
from reinforce_ada.sampling.factory import build_sampler


def _script(seed: int, prompt_ids, length: int, pass_rates) -> dict:
    rng = np.random.default_rng(seed)
    return {pid: [float(r) for r in (rng.random(length) < pass_rates[i % len(pass_rates)])]
            for i, pid in enumerate(prompt_ids)}


def _summary(batch):
    pools = {pid: ([c.text for c in pool.completions], pool.num_drawn, pool.num_positive, pool.exit_round is not None)
             for pid, pool in batch.pools.items()}
    groups = [(g.prompt_id, [c.text for c in g.completions], g.pool_mean, g.pool_std, g.pool_count,
               g.pool_num_positive, g.exited) for g in batch.groups]
    return pools, groups


@pytest.mark.parametrize("exit_rule,selection", [("balanced", "balanced"), ("positive", "positive_focused"),
                                                 ("mixed", "balanced")])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_streaming_with_fixed_allocation_matches_the_round_based_sampler(exit_rule, selection, seed):
    ids = list(range(12))
    config = SamplerConfig(samples_per_round=4, max_rounds=3, group_size=4, exit_rule=exit_rule,
                           selection=selection, seed=seed)
    script = _script(seed, ids, 4 * 3, pass_rates=[0.0, 0.05, 0.2, 0.5, 0.8, 1.0])
    rounds = AdaptiveSampler(ScriptedGenerator(script), ScriptedVerifier(), config).sample(make_prompts(ids))
    streamed_config = replace(config, mode="streaming",
                              streaming=StreamingConfig(allocation="fixed", max_in_flight=4 * 3 * len(ids)))
    streaming = build_sampler(streamed_config, ScriptedGenerator(script), ScriptedVerifier(), cancel_on_exit=False,
                              fill_idle=False)
    streamed = streaming.sample(make_prompts(ids))

    assert _summary(streamed) == _summary(rounds)
    np.testing.assert_array_equal(streamed.advantages, rounds.advantages)
    assert (streamed.num_prompts, streamed.num_dropped_unexited, streamed.num_empty) == \
        (rounds.num_prompts, rounds.num_dropped_unexited, rounds.num_empty)
    assert type(streaming).__name__ == "StreamingSampler"
    drawn = sorted({pool.num_drawn for pool in rounds.pools.values()})
    assert len(drawn) > 1 and max(drawn) == 12  # prompts left after different rounds; some used every round
