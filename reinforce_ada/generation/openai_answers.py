"""Reading an OpenAI-compatible server's answers: each choice of ``/v1/completions`` or ``/v1/chat/completions`` as a
:class:`~reinforce_ada.types.Completion` (text, finish reason, the sampled tokens' ids and log-probs when the server
sent them), and the check that a server returned token ids at all."""

from __future__ import annotations

from typing import Any

from reinforce_ada.sampling.protocols import FatalGenerationError
from reinforce_ada.types import Completion, Prompt

__all__ = ["MissingTokenIdsError", "check_token_ids", "completion_of"]


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
