"""Sampling: the contracts every generation backend and reward function meets, and (still in
:mod:`reinforce_ada.sampler` and :mod:`reinforce_ada.streaming`) the samplers that drive them.

Backends import their request type and errors from :mod:`reinforce_ada.sampling.protocols`, a small module with no
dependency on the sampling loop. This package's ``__init__`` imports nothing, so importing the protocols stays cheap.
"""
