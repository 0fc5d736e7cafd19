"""The TRL versions this integration supports, checked when ``reinforce_ada.integrations.trl`` is imported.

The integration plugs into a few private pieces of ``trl.GRPOTrainer`` (the *hooks* below). They all exist, with the
signatures used here, from TRL 1.14.1 on (1.14.0 and older have no ``num_generations`` parameter: in vLLM modes
they generate ``num_generations`` per unique prompt, so they would treat our rows as groups of repeats); CI runs the
TRL tests on 1.14.1 and 1.16.0.

* older than 1.14.1: ``ImportError`` naming the supported range;
* 1.14.1 up to 1.16.x: supported;
* newer: ``ImportError`` naming the missing hook(s) if any is gone, else a ``UserWarning`` (untested, probably fine).
"""

from __future__ import annotations

import inspect
import warnings
from importlib import metadata
from typing import Any

from packaging.version import InvalidVersion, Version

SUPPORTED_TRL = ">=1.14.1,<1.17"
"""The tested range, as in ``pyproject.toml``'s ``trl`` extra (newer versions import with a warning)."""
_MIN, _TESTED_BELOW = Version("1.14.1"), Version("1.17")

HOOKS: dict[str, tuple[str, ...]] = {
    "__init__": ("rollout_func",),
    "_generate_and_score_completions": ("inputs",),
    "_generate_single_turn": ("prompt_ids", "images", "multimodal_fields", "num_generations"),
    "_tokenize_prompts": ("prompts",),
    "_calculate_rewards": ("inputs", "prompts", "completions", "completion_ids_list"),
    "_log_completion_extra": ("column", "values"),
    "_log_metric": ("name", "value"),
}
"""``GRPOTrainer`` methods the integration calls or overrides, with the parameters it relies on."""


def missing_hooks(trainer_cls: Any) -> list[str]:
    """The hooks of :data:`HOOKS` that ``trainer_cls`` lacks (or whose parameters differ), as readable strings."""
    missing = []
    for name, params in HOOKS.items():
        method = getattr(trainer_cls, name, None)
        if method is None:
            missing.append(f"GRPOTrainer.{name}")
            continue
        try:
            have = inspect.signature(method).parameters
        except (TypeError, ValueError):
            continue
        absent = [p for p in params if p not in have]
        if absent:
            missing.append(f"GRPOTrainer.{name}({', '.join(absent)})")
    return missing


def check_trl_version(version: str | None = None, trainer_cls: Any = None) -> str:
    """Return the installed TRL version (or check ``version``); raise ``ImportError`` when it cannot work.

    ``trainer_cls`` (default: ``trl.GRPOTrainer``) is inspected for the hooks only when the version is newer than
    the tested range.

    >>> check_trl_version("1.16.0")
    '1.16.0'
    >>> check_trl_version("1.14.0")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ImportError: reinforce_ada.integrations.trl supports trl>=1.14.1,<1.17 but trl 1.14.0 is installed; ...
    """
    if version is None:
        try:
            version = metadata.version("trl")
        except metadata.PackageNotFoundError:
            raise ImportError(
                "reinforce_ada.integrations.trl needs TRL, which is not installed: "
                "pip install 'reinforce-ada[trl]'  (trl" + SUPPORTED_TRL + ")"
            ) from None
    try:
        parsed = Version(Version(version).base_version)
    except InvalidVersion:
        raise ImportError(f"cannot parse the installed trl version {version!r}; "
                          f"supported: trl{SUPPORTED_TRL}") from None
    if parsed < _MIN:
        raise ImportError(
            f"reinforce_ada.integrations.trl supports trl{SUPPORTED_TRL} but trl {version} is installed; "
            f"install a supported version with: pip install 'reinforce-ada[trl]'  (or 'trl{SUPPORTED_TRL}')"
        )
    if parsed >= _TESTED_BELOW:
        if trainer_cls is None:
            from trl import GRPOTrainer as trainer_cls
        missing = missing_hooks(trainer_cls)
        if missing:
            raise ImportError(
                f"trl {version} lacks what reinforce_ada.integrations.trl plugs into: {', '.join(missing)}; "
                f"install a supported version: pip install 'trl{SUPPORTED_TRL}'"
            )
        warnings.warn(
            f"reinforce_ada.integrations.trl is tested with trl{SUPPORTED_TRL}; trl {version} has every hook it "
            "uses, so it should work, but it is untested", UserWarning, stacklevel=2)
    return version
