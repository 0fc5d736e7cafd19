"""The Hugging Face backend behind the asynchronous engine interface the streaming sampler drives."""

from __future__ import annotations

from reinforce_ada.sampling.sync_engine import AsyncGeneratorEngine

__all__ = ["AsyncGeneratorEngine", "AsyncHFEngine"]


class AsyncHFEngine(AsyncGeneratorEngine):
    """:class:`AsyncGeneratorEngine` around a Hugging Face ``HFGenerator`` (any object with ``generate(requests)``)."""
