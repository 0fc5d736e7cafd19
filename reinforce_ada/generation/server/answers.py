"""Reading an OpenAI-compatible server's answers (:func:`read_answer`): what its HTTP status means for the request --
try again (408/409/425/429/5xx, a body that is not JSON) or never (any other 4xx: :class:`ServerRequestError`) --
and each choice of ``/v1/completions`` or ``/v1/chat/completions`` as a :class:`~reinforce_ada.types.Completion`
(text, finish reason, the sampled tokens' ids and log-probs when the server sent them), with the check that a server
returned token ids at all. An answer that does not fit the request is a :class:`ServerAnswerError`, never retried."""

from __future__ import annotations

from typing import Any

from reinforce_ada.sampling.protocols import FatalGenerationError, GenerationError
from reinforce_ada.types import Completion, Prompt

__all__ = ["RETRY_STATUS", "MissingTokenIdsError", "ServerAnswerError", "ServerRequestError", "check_token_ids",
           "completion_of", "completions_of", "read_answer"]

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
"""HTTP statuses another try of the same request may turn into an answer."""


class ServerRequestError(FatalGenerationError):
    """The server refused a request in a way retrying will not fix (a 4xx other than 408/409/425/429)."""


class ServerAnswerError(FatalGenerationError):
    """The server answered (HTTP 200, JSON), but not what the request asked for: the wrong number of choices, a
    completion whose text is not a string, log-probs that do not match its token ids. The same request gets the
    same kind of answer, so it is not retried."""


class MissingTokenIdsError(FatalGenerationError):
    """The server's completions carry no token ids (it ignored ``return_token_ids``)."""


def check_token_ids(data: dict[str, Any], base_url: str) -> None:
    """Refuse an answer with a completion that carries no token ids (neither ``token_ids`` nor ``"token_id:N"`` token
    names): its tokens would have to be guessed from its text."""
    for choice in data.get("choices") or []:
        if not isinstance(choice, dict):
            continue
        names = (choice.get("logprobs") or {}).get("tokens") or []
        named = bool(names) and all(isinstance(t, str) and t.startswith("token_id:") for t in names)
        if not choice.get("token_ids") and not named:
            raise MissingTokenIdsError(
                f"the server at {base_url} returned a completion without token ids (it ignored return_token_ids): "
                f"the trainer trains on the sampled token ids and will not re-tokenise the text; use a server that "
                f"returns them (vLLM >= 0.10.2), or the hf / vllm generator")


def completion_of(prompt: Prompt, choice: dict[str, Any]) -> Completion:
    """One choice of a completions or chat answer as a :class:`Completion`: text, finish reason, and the sampled
    tokens' ids (``token_ids``, else ``"token_id:N"`` token names) and log-probs when the server sent them."""
    text = choice["message"]["content"] if "message" in choice else choice["text"]
    if not isinstance(text, str):
        raise TypeError(f"completion text is {type(text).__name__}, not str")
    finish = "length" if choice.get("finish_reason") == "length" else "stop"
    info = choice.get("logprobs") or {}
    if "content" in info:  # chat: one entry per token
        entries = info["content"] or []
        tokens, logprobs = [e["token"] for e in entries], [e["logprob"] for e in entries]
    else:  # completions: parallel lists
        tokens, logprobs = list(info.get("tokens") or []), list(info.get("token_logprobs") or [])
    token_ids = choice.get("token_ids")
    if token_ids is None and tokens and all(isinstance(t, str) and t.startswith("token_id:") for t in tokens):
        token_ids = [int(t.removeprefix("token_id:")) for t in tokens]
    token_ids = [int(t) for t in token_ids or ()]
    if not logprobs:
        return Completion(prompt.prompt_id, text, token_ids=tuple(token_ids), finish_reason=finish)
    if len(logprobs) != len(token_ids) or any(lp is None for lp in logprobs):
        raise ValueError(f"{len(logprobs)} log-probs for {len(token_ids)} token ids")
    return Completion(prompt.prompt_id, text, token_ids=tuple(token_ids), logprobs=[float(lp) for lp in logprobs],
                      finish_reason=finish)


def completions_of(prompt: Prompt, data: dict[str, Any], n: int = 1) -> list[Completion]:
    """The ``n`` choices of an answer, in ``index`` order, with their token ids and log-probs when present."""
    choices = sorted(data["choices"], key=lambda c: c.get("index", 0))
    if len(choices) != n:
        raise ValueError(f"expected {n} choice(s), got {len(choices)}")
    return [completion_of(prompt, choice) for choice in choices]


def read_answer(response: Any, prompt: Prompt, n: int, request_id: str, *,
                token_ids_from: str | None = None) -> list[Completion]:
    """The ``n`` completions of ``prompt`` in an HTTP ``response`` to request ``request_id``, or the error the
    library's retry rule reads: a plain :class:`GenerationError` (transient) for HTTP 408/409/425/429/5xx or a body
    that is not JSON, :class:`ServerRequestError` for any other status than 200, :class:`ServerAnswerError` for an
    answer that does not fit the request; ``token_ids_from`` (the server's URL): a completion without token ids is a
    :class:`MissingTokenIdsError`."""
    if response.status_code in RETRY_STATUS:
        raise GenerationError(f"HTTP {response.status_code}")
    if response.status_code != 200:
        raise ServerRequestError(f"request {request_id}: HTTP {response.status_code}: {response.text[:300]}")
    try:
        data = response.json()
    except ValueError as err:  # a body cut or garbled on the way: another try may get it whole
        raise GenerationError(f"malformed response (not JSON): {err}") from err
    if token_ids_from is not None:
        check_token_ids(data, token_ids_from)
    try:
        return completions_of(prompt, data, n)
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as err:
        raise ServerAnswerError(f"request {request_id}: the server's answer does not fit the request "
                                f"({type(err).__name__}: {err}); not retried, as the same request gets the "
                                f"same kind of answer") from err
