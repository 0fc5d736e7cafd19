"""Typed configuration: one tree. :class:`TrainConfig` (the trainer) holds a :class:`SamplerConfig` under ``sampler``,
which holds the ``streaming`` (:class:`StreamingConfig`), ``memory`` (:class:`MemoryConfig`) and ``est``
(:class:`EstConfig`) sections; :class:`DynamicSamplingConfig` is DAPO's. Every field is documented and checked in
``__post_init__`` (first against its annotation, then ranges and cross-field rules), so bad values fail before any model
is loaded or any completion generated, with a message naming the field. :func:`load_config` reads a YAML file (nested
mappings; errors name the file and line) and command-line overrides (dotted names, or the flat aliases of the sampler's
fields).

Modules: ``checks`` (the type check, field docstrings), ``streaming`` (two sampler sections), ``est`` (the third),
``sampler`` (:class:`SamplerConfig`), ``dynamic`` (:class:`DynamicSamplingConfig`), ``strategies`` (the strategy
table), ``train`` (:class:`TrainConfig`), ``defaults`` (model-dependent defaults), ``loading`` (YAML and command line).
"""

from reinforce_ada.config.checks import check_field_types, field_docs
from reinforce_ada.config.loading import (
    FALSE_SPELLINGS,
    TRUE_SPELLINGS,
    add_config_arguments,
    config_settings,
    flat_aliases,
    load_config,
    read_config_file,
)
from reinforce_ada.config.dynamic import DynamicSamplingConfig
from reinforce_ada.config.sampler import SamplerConfig
from reinforce_ada.config.strategies import STRATEGIES, STRATEGY_SAMPLER_SETTINGS, strategy_sampler_values
from reinforce_ada.config.est import EstConfig
from reinforce_ada.config.streaming import MemoryConfig, StreamingConfig
from reinforce_ada.config.defaults import MODEL_DEFAULTS, ROLLOUT_MISMATCH_LIMITS, model_kind
from reinforce_ada.config.train import TrainConfig
from reinforce_ada.errors import ConfigError

__all__ = ["FALSE_SPELLINGS", "MODEL_DEFAULTS", "ROLLOUT_MISMATCH_LIMITS", "STRATEGIES", "STRATEGY_SAMPLER_SETTINGS",
           "TRUE_SPELLINGS", "ConfigError", "DynamicSamplingConfig", "EstConfig", "MemoryConfig", "SamplerConfig",
           "StreamingConfig",
           "TrainConfig",
           "add_config_arguments", "check_field_types", "config_settings", "field_docs", "flat_aliases", "load_config",
           "model_kind",
           "read_config_file", "strategy_sampler_values"]
