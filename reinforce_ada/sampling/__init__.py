"""Sampling: the contracts every generation backend and reward function meets, and the streaming scheduler.

* :mod:`reinforce_ada.sampling.protocols` -- ``GenerationRequest``, the ``Generator`` and ``Verifier`` protocols and
  the generation/verifier errors; backends import them from here, never from the sampling loop.
* :mod:`reinforce_ada.sampling.scheduler` -- ``StreamingScheduler``, the streaming sampler's ``want``/``record``
  state machine, and ``StreamingOptions``.

The samplers themselves are still :mod:`reinforce_ada.sampler` (round-based, dynamic) and
:mod:`reinforce_ada.streaming`. This ``__init__`` imports nothing, so importing the protocols stays cheap.
"""
