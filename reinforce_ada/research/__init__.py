"""Research tools: they measure the samplers, they are not on the training path.

* :mod:`~reinforce_ada.research.simulate` -- one step of every sampling strategy on prompts with hidden pass rates
  (``reinforce-ada simulate``);
* :mod:`~reinforce_ada.research.simulate_multistep` -- a training run's worth of steps with drifting pass rates,
  streaming, memory and the latency model (``reinforce-ada simulate-multistep``);
* :mod:`~reinforce_ada.research.latency` -- a continuous-batching generation-latency model in virtual time;
* :mod:`~reinforce_ada.research.select_prompts` -- estimate pass rates with ``k`` samples and keep a difficulty range
  (``reinforce-ada select-prompts``).
"""
