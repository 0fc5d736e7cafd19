"""reinforce-ada: adaptive multi-round sampling for GRPO-style RL of LLMs (arXiv 2510.04996)."""

from reinforce_ada.config import ConfigError, DynamicSamplingConfig, SamplerConfig
from reinforce_ada.sampling.sampler import AdaptiveSampler, DynamicSampler
from reinforce_ada.sampling.protocols import (
    GenerationError,
    GenerationRequest,
    Generator,
    Verifier,
    VerifierError,
)
from reinforce_ada.types import Completion, Group, Prompt, PromptPool, RoundStats, SampledBatch

__version__ = "0.1.0"

__all__ = [
    "AdaptiveSampler",
    "Completion",
    "ConfigError",
    "DynamicSampler",
    "DynamicSamplingConfig",
    "GenerationError",
    "GenerationRequest",
    "Generator",
    "Group",
    "Prompt",
    "PromptPool",
    "RoundStats",
    "SampledBatch",
    "SamplerConfig",
    "Verifier",
    "VerifierError",
]
