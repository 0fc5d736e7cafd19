"""The trainer's backend for a running OpenAI-compatible server (``train --generator openai --base-url URL``).

:func:`server_generator` checks the server before any training -- it answers, serves the named model (or exactly one)
and, unless the run is generation-only, takes the trainer's weights
(:class:`~reinforce_ada.generation.server.weights.ServerWeights`) -- each a one-line
:class:`~reinforce_ada.errors.ConfigError` when it does not. It returns a :class:`ServerGenerator`: the
:class:`~reinforce_ada.generation.server.client.OpenAICompletionsEngine` client sending every prompt as the token ids
the trainer rebuilds (``encode_prompt``: the server samples exactly that prompt), refusing completions without token
ids and treating a server that answers nothing for ``dead_after_s`` as dead
(:mod:`~reinforce_ada.generation.server.liveness`), plus ``load_weights``, which pushes the trainer's weights.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from reinforce_ada.errors import ConfigError
from reinforce_ada.generation.server.client import OpenAICompletionsEngine, _httpx
from reinforce_ada.sampling.protocols import FatalGenerationError
from reinforce_ada.generation.prompting import check_sampling_params, encode_prompt

__all__ = ["ServerGenerator", "served_model_name", "server_generator"]


class ServerGenerator(OpenAICompletionsEngine):
    """The client of :class:`OpenAICompletionsEngine` plus the server's weight sync: ``weights``
    (:class:`~reinforce_ada.generation.server.weights.ServerWeights`), or None for a generation-only run (the server
    keeps its own weights)."""

    def __init__(self, base_url: str, model: str, *, weights: Any = None, **options: Any):
        super().__init__(base_url, model, **options)
        self.weights = weights

    def load_weights(self, model: Any) -> int:
        """Push ``model``'s weights into the server (:attr:`weights`: written to shared memory, then the server's
        weight-update calls and a prefix-cache reset, each under the same dead-server rule as a request); generation
        only (no :attr:`weights`): nothing is pushed. The bytes written."""
        if self.weights is None:
            return 0
        written = self.weights.shared.write(model)

        async def push() -> None:
            try:
                for path, body in self.weights.update_calls():
                    await self._weights_call(path, body)
                for attempt in range(20):  # refused while a request the server is still aborting holds blocks
                    query = "?reset_running_requests=true" if attempt == 19 else ""
                    if (await self._weights_call("/reset_prefix_cache" + query, None)).get("success", True):
                        return
                    await asyncio.sleep(0.1)
                raise FatalGenerationError(f"the server at {self.base_url} did not reset its prefix cache")
            finally:
                await self.aclose()

        asyncio.run(push())
        self.weights.num_pushes += 1
        return written

    async def _weights_call(self, path: str, body: dict[str, Any] | None) -> dict[str, Any]:
        """One call of a weight sync; any failure is fatal (a half-done update is not retried)."""
        httpx = _httpx()
        try:
            with self.liveness.asking() if self.liveness is not None else contextlib.nullcontext():
                response = await self._within_deadline(self._client().post(path, json=body), path)
        except (asyncio.TimeoutError, httpx.HTTPError) as err:
            raise FatalGenerationError(f"the server at {self.base_url} did not take the weights ({path}: "
                                       f"{type(err).__name__}: {err or 'the connection was dropped'})") from err
        if self.liveness is not None:
            self.liveness.answered()
        if response.status_code != 200:
            raise FatalGenerationError(f"the server at {self.base_url} did not take the weights ({path}: HTTP "
                                       f"{response.status_code}: {' '.join(response.text.split())[:300]})")
        try:
            return response.json()
        except ValueError:
            return {}

    def close(self) -> None:
        """Release the server's weight sync (its shared-memory file); idempotent."""
        weights, self.weights = self.weights, None
        if weights is not None:
            weights.close()



def served_model_name(base_url: str, requested: str | None, *, api_key: str | None = None,
                      timeout_s: float = 30.0) -> str:
    """The server's model name to send: ``requested`` when the server lists it, else the one model it lists."""
    import httpx

    url = base_url.rstrip("/").removesuffix("/v1")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        response = httpx.get(f"{url}/v1/models", headers=headers, timeout=timeout_s)
        names = [entry["id"] for entry in response.json()["data"]] if response.status_code == 200 else None
    except httpx.TimeoutException as err:  # connected (or not) and heard nothing back
        raise ConfigError(f"cannot reach the server at {url}: no answer to /v1/models within {timeout_s:g} s "
                          f"({type(err).__name__})") from None
    except httpx.HTTPError as err:
        raise ConfigError(f"cannot reach the server at {url}: {type(err).__name__}: {err}") from None
    except (ValueError, KeyError, TypeError):
        names = None
    if names is None:  # a server without the model list: take the name as given
        if requested is None:
            raise ConfigError(f"the server at {url} does not list its models (/v1/models); give --served-model")
        return requested
    if requested is None:
        if len(names) != 1:
            raise ConfigError(f"the server at {url} serves {len(names)} models ({', '.join(names)}); name one with "
                              f"--served-model")
        return names[0]
    if requested not in names:
        raise ConfigError(f"--served-model {requested!r}: the server at {url} serves {', '.join(names) or 'nothing'}")
    return requested


def server_generator(model: Any, tokenizer: Any, *, base_url: str, served_model: str | None = None,
                     max_new_tokens: int = 16, temperature: float = 1.0, top_p: float = 1.0,
                     use_chat_template: bool = True, generation_only: bool = False, dead_after_s: float = 60.0,
                     api_key: str | None = None, **engine_options: Any) -> ServerGenerator:
    """The ``openai`` generator for ``model`` (the trainer's) and ``tokenizer`` (module docstring)."""
    check_sampling_params(max_new_tokens, temperature, top_p)
    name = served_model_name(base_url, served_model, api_key=api_key)
    weights = None
    if not generation_only:
        from reinforce_ada.generation.server.weights import ServerWeights

        weights = ServerWeights(base_url, model, api_key=api_key)
    return ServerGenerator(
        base_url, name, max_tokens=max_new_tokens, temperature=temperature, top_p=top_p, api_key=api_key,
        prompt_token_ids=lambda prompt: encode_prompt(tokenizer, prompt, use_chat_template), require_token_ids=True,
        dead_after_s=dead_after_s, weights=weights, **engine_options)
