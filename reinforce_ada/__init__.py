"""reinforce-ada: adaptive multi-round sampling for GRPO-style RL of LLMs (arXiv 2510.04996).

The public names below are imported on first use, so ``import reinforce_ada`` (and ``reinforce-ada --help``, or a
one-line config error) loads neither torch nor the samplers.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "AdaptiveSampler": "reinforce_ada.sampling.sampler",
    "Completion": "reinforce_ada.types",
    "ConfigError": "reinforce_ada.errors",
    "DynamicSampler": "reinforce_ada.sampling.sampler",
    "DynamicSamplingConfig": "reinforce_ada.config",
    "GenerationError": "reinforce_ada.sampling.protocols",
    "GenerationRequest": "reinforce_ada.sampling.protocols",
    "Generator": "reinforce_ada.sampling.protocols",
    "Group": "reinforce_ada.types",
    "Prompt": "reinforce_ada.types",
    "PromptPool": "reinforce_ada.types",
    "RoundStats": "reinforce_ada.types",
    "SampledBatch": "reinforce_ada.types",
    "Sampler": "reinforce_ada.sampling.protocols",
    "SamplerConfig": "reinforce_ada.config",
    "Verifier": "reinforce_ada.sampling.protocols",
    "VerifierError": "reinforce_ada.sampling.protocols",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
