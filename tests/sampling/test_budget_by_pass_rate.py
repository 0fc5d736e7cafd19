"""remember_pools reports where a step's samples went by the memory's pass-rate estimate before the step's update."""

from reinforce_ada.sampling.memory import PassRateMemory
from reinforce_ada.sampling.pools import remember_pools
from reinforce_ada.types import Completion, Prompt, PromptPool


def _pool(prompt, rewards):
    pool = PromptPool(prompt.prompt_id)
    for r in rewards:
        pool.add(Completion(prompt.prompt_id, "x", reward=r))
    pool.num_drawn = len(rewards)
    return pool


def test_samples_by_the_estimate_the_step_was_sampled_with():
    memory = PassRateMemory(half_life=None)
    easy, hard, new = Prompt(1, "easy", answer="1"), Prompt(2, "hard", answer="2"), Prompt(3, "new", answer="3")
    memory.update(easy, 30, 0)  # posterior mean (1 + 30) / (2 + 30) = 0.97
    memory.update(hard, 0, 30)  # 1 / 32 = 0.03
    pools = {1: _pool(easy, [1.0] * 4), 2: _pool(hard, [0.0] * 12), 3: _pool(new, [1.0, 0.0] * 4)}
    metrics = remember_pools(memory, [easy, hard, new], pools)
    assert metrics == {"by_pass_rate/0.8-1.0/num_prompts": 1.0, "by_pass_rate/0.8-1.0/num_samples": 4.0,
                       "by_pass_rate/0.0-0.1/num_prompts": 1.0, "by_pass_rate/0.0-0.1/num_samples": 12.0,
                       "by_pass_rate/unseen/num_prompts": 1.0, "by_pass_rate/unseen/num_samples": 8.0}
    # the memory took the step in afterwards: the new prompt is known now, at 5/10 -> (1 + 4) / (2 + 8) = 0.5
    assert new in memory and memory.pass_rate(new) == 0.5
    again = remember_pools(memory, [new], {3: _pool(new, [1.0, 0.0])})
    assert again == {"by_pass_rate/0.4-0.6/num_prompts": 1.0, "by_pass_rate/0.4-0.6/num_samples": 2.0}
