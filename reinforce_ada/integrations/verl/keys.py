"""Reading verl's hydra tree: the name of this plugin's block and estimator, and two helpers that every config check
of the plugin (the round-based sampler's in :mod:`~reinforce_ada.integrations.verl.config`, Est's in
:mod:`~reinforce_ada.integrations.verl.est_config`) reads the tree with. Imports no part of verl."""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["ESTIMATOR_NAME", "EST_ESTIMATOR_NAME", "get_key", "to_plain"]

ESTIMATOR_NAME = "reinforce_ada"
"""The name the round-based sampler's advantage estimator is registered under (``algorithm.adv_estimator``), and the
name of this plugin's block, ``algorithm.reinforce_ada``."""

EST_ESTIMATOR_NAME = "reinforce_ada_est"
"""The name Est's advantage estimator is registered under (``algorithm.adv_estimator``)."""


def to_plain(node: Any) -> Any:
    """An OmegaConf node (or anything mapping-like) as plain Python containers."""
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf

        if isinstance(node, (DictConfig, ListConfig)):
            return OmegaConf.to_container(node, resolve=True)
    except ImportError:  # pragma: no cover -- omegaconf always comes with verl
        pass
    if isinstance(node, Mapping):
        return {k: to_plain(v) for k, v in node.items()}
    return node


def get_key(config: Any, dotted: str, default: Any = None) -> Any:
    """``config``'s value at the dotted path (``"algorithm.reinforce_ada.mode"``), or ``default`` where it is
    missing or None."""
    node = config
    for part in dotted.split("."):
        if node is None:
            return default
        node = node.get(part, None) if hasattr(node, "get") else getattr(node, part, None)
    return default if node is None else node
