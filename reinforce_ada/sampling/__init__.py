"""Sampling: the contracts every generation backend and reward function meets, and the pieces every sampler shares.

* :mod:`reinforce_ada.sampling.protocols` -- ``GenerationRequest``, ``SampleRequest``, the ``Generator`` and
  ``Verifier`` protocols and the generation/verifier errors; backends import them from here, never from a sampler.
* :mod:`reinforce_ada.sampling.scoring` -- ``validate_prompts``, generation with retries, ``score`` and the one
  generate -> score helper (``sample_and_score``) of the samplers, the evaluation and ``select-prompts``.
* :mod:`reinforce_ada.sampling.pools` -- the record -> exit check -> selection -> batch path every sampler runs
  (round-based, dynamic, streaming), and ``PoolSampler``, what the round-based and streaming samplers share.
* :mod:`reinforce_ada.sampling.scheduler` -- ``StreamingScheduler``, the streaming sampler's ``want``/``record``
  state machine, and ``StreamingOptions``.
* :mod:`reinforce_ada.sampling.factory` -- ``build_sampler``, a sampler from a ``SamplerConfig``.
* :mod:`reinforce_ada.sampling.sampler` -- the round-based samplers: ``AdaptiveSampler`` (the paper's Alg. 1, GRPO
  as one round, budget mode) and ``DynamicSampler`` (DAPO).
* :mod:`reinforce_ada.sampling.streaming` -- ``StreamingSampler``, which drives the scheduler with asyncio against
  an ``AsyncEngine``.
* :mod:`reinforce_ada.sampling.memory` -- ``PassRateMemory``, the cross-step per-prompt pass-rate memory.

The samplers differ only in *when* they ask for samples. This ``__init__`` imports nothing, so importing the
protocols stays cheap.
"""
