"""Keeping a vLLM server's weights equal to the trainer's: the shared-memory weight transfer over vLLM's HTTP API.

``train --generator openai --base-url URL`` samples from a running OpenAI-compatible server. Unless the run is
``--generation-only``, the server must take the trainer's weights after every update, so that it samples from the
policy being trained. vLLM's server offers that through its weight-transfer endpoints (development mode:
``VLLM_SERVER_DEV_MODE=1``) with a transfer backend named at its start (``--weight-transfer-config``); this library's
backend, ``reinforce_ada_shm`` (:mod:`~reinforce_ada.generation.vllm.shared_weights`), passes the weights through a
file in ``/dev/shm``, so the server must run on the trainer's machine (on its CPU or on a GPU there)::

    VLLM_SERVER_DEV_MODE=1 python -m vllm.entrypoints.openai.api_server --model MODEL --served-model-name policy \\
        --weight-transfer-config '{"backend": "reinforce_ada_shm"}' --logprobs-mode processed_logprobs

:class:`ServerWeights` checks at the start, before any training, that the server takes weights
(``/init_weight_transfer_engine``: the server maps the file) and refuses in one line naming why it cannot
(:class:`ServerWeightsRefused`, exit 2: not in development mode, no or another transfer backend, a server that cannot
see the file). Each sync then copies the parameters into the file and calls ``/start_weight_update``,
``/update_weights`` (the layout), ``/finish_weight_update`` and ``/reset_prefix_cache``
(:meth:`ServerGenerator.load_weights <reinforce_ada.generation.server.generator.ServerGenerator.load_weights>`).
"""

from __future__ import annotations

import logging
from typing import Any

from reinforce_ada.errors import ConfigError
from reinforce_ada.generation.vllm.shared_weights import BACKEND, SharedWeights

logger = logging.getLogger(__name__)

__all__ = ["SERVER_COMMAND", "ServerWeights", "ServerWeightsRefused"]

SERVER_COMMAND = (f"VLLM_SERVER_DEV_MODE=1 python -m vllm.entrypoints.openai.api_server --model MODEL "
                  f"--weight-transfer-config '{{\"backend\": \"{BACKEND}\"}}' --logprobs-mode processed_logprobs")
"""How to start a vLLM server that takes the trainer's weights (on the trainer's machine)."""


class ServerWeightsRefused(ConfigError):
    """The server cannot take the trainer's weights; the message says why and what to do."""


class ServerWeights:
    """The trainer's weights for the vLLM server at ``base_url`` (module docstring).

    Construction checks the server takes them (one ``/init_weight_transfer_engine``, bounded by ``timeout_s``) and
    refuses in one line when it does not. The engine that talks to the server sends each sync's calls
    (:meth:`update_calls`) after
    :meth:`SharedWeights.write <reinforce_ada.generation.vllm.shared_weights.SharedWeights.write>`
    (:meth:`~reinforce_ada.generation.server.generator.ServerGenerator.load_weights`), under the same rule for a
    server that stops answering as its requests."""

    def __init__(self, base_url: str, model: Any, *, api_key: str | None = None, timeout_s: float = 60.0):
        self.base_url = base_url.rstrip("/").removesuffix("/v1")
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.shared = SharedWeights(model)
        self.num_pushes = 0
        try:
            self._init(timeout_s)
        except BaseException:
            self.shared.close()
            raise

    def _refuse(self, why: str) -> ServerWeightsRefused:
        return ServerWeightsRefused(
            f"the server at {self.base_url} cannot take the trainer's weights: {why}. Start it on this machine as "
            f"{SERVER_COMMAND}, or pass --generation-only to train on what it samples from its own weights "
            f"(off-policy: the mismatch is logged and corrected by truncated importance sampling)")

    def _init(self, timeout_s: float) -> None:
        import httpx

        try:
            response = httpx.post(f"{self.base_url}/init_weight_transfer_engine", headers=self._headers,
                                  json={"init_info": self.shared.init_info()}, timeout=timeout_s)
        except httpx.HTTPError as err:
            raise ConfigError(f"cannot reach the server at {self.base_url}: {type(err).__name__}: {err}") from None
        if response.status_code == 200:
            # a trainer stopped during a sync (a server that hung, a kill) leaves the server's update open, and the
            # next start_weight_update would be refused: finish it (the server keeps the weights it had; the first
            # sync overwrites them all). Without an open update the server refuses this, which is fine.
            finished = httpx.post(f"{self.base_url}/finish_weight_update", headers=self._headers, json={},
                                  timeout=timeout_s)
            if finished.status_code == 200:
                logger.info("the server at %s had a weight update still open (a trainer stopped during a sync); "
                            "finished it", self.base_url)
            return
        text = " ".join(response.text.split())[:300]
        if response.status_code == 404:
            raise self._refuse("it has no weight-transfer endpoints (/init_weight_transfer_engine: 404; vLLM serves "
                               "them with VLLM_SERVER_DEV_MODE=1)")
        if "not configured" in text:
            raise self._refuse(f"it was started without a weight transfer ({text})")
        if "No such file" in text or "FileNotFoundError" in text:
            raise self._refuse(f"it cannot see {self.shared.path} (it runs on another machine or in a container); "
                               f"{text}")
        raise self._refuse(f"/init_weight_transfer_engine answered HTTP {response.status_code}: {text} (its "
                           f"--weight-transfer-config must name the {BACKEND!r} backend)")

    def update_calls(self) -> list[tuple[str, dict[str, Any] | None]]:
        """The ``(path, JSON body)`` calls of one sync, after the weights were written: start, the layout, finish
        (the prefix cache is reset after them)."""
        return [("/start_weight_update", None), ("/update_weights", {"update_info": self.shared.update_info()}),
                ("/finish_weight_update", {})]

    def close(self) -> None:
        """Release the server's mapping (best effort) and remove the file; idempotent."""
        shared, self.shared = getattr(self, "shared", None), None
        if shared is None:
            return
        try:
            import httpx

            httpx.post(f"{self.base_url}/shutdown_weight_transfer_engine", headers=self._headers, timeout=5.0)
        except Exception:  # noqa: BLE001 -- a server that is gone has nothing to release
            pass
        shared.close()
