"""The TRL versions this integration supports, checked when ``reinforce_ada.integrations.trl`` is imported.

The integration reuses private pieces of ``trl.GRPOTrainer`` (``_generate_single_turn``, ``_tokenize_prompts``, the
``rollout_func`` hook and the layout of the dict ``_generate_and_score_completions`` returns), which TRL may change in
any minor release, so the range is pinned to the minor version it was written and tested against.
"""

from __future__ import annotations

from importlib import metadata

from packaging.version import InvalidVersion, Version

SUPPORTED_TRL = ">=1.16,<1.17"
"""The supported range, as in ``pyproject.toml``'s ``trl`` extra."""
_MIN, _MAX_EXCLUSIVE = Version("1.16"), Version("1.17")


def check_trl_version(version: str | None = None) -> str:
    """Return the installed TRL version (or check ``version``); raise ``ImportError`` naming the supported range.

    >>> check_trl_version("1.16.0")
    '1.16.0'
    >>> check_trl_version("1.15.2")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ImportError: reinforce_ada.integrations.trl supports trl>=1.16,<1.17 but trl 1.15.2 is installed; ...
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
        parsed = Version(version)
    except InvalidVersion:
        raise ImportError(f"cannot parse the installed trl version {version!r}; "
                          f"supported: trl{SUPPORTED_TRL}") from None
    if not (_MIN <= Version(parsed.base_version) < _MAX_EXCLUSIVE):
        raise ImportError(
            f"reinforce_ada.integrations.trl supports trl{SUPPORTED_TRL} but trl {version} is installed; "
            f"install a supported version with: pip install 'reinforce-ada[trl]'  (or 'trl{SUPPORTED_TRL}')"
        )
    return version
