"""vLLM's ``AsyncLLM`` behind the streaming sampler's asynchronous engine interface (GPU; vLLM is optional).

Each call of :meth:`VLLMAsyncEngine.complete` is one vLLM request with ``n=1`` on the prompt's token ids from
:func:`~reinforce_ada.generation.prompting.encode_prompt` (the ids the HF backend and the trainer use), with
``output_kind=FINAL_ONLY`` so only the finished sequence comes back. vLLM's scheduler batches all outstanding
requests continuously; requests of the same prompt share its KV prefix through prefix caching.

Cancellation: when the awaiting task is cancelled, ``AsyncLLM.generate`` is interrupted and the request is aborted
(``engine.abort(request_id)``) so its sequence leaves the running batch at the next scheduler step -- the work the
streaming sampler saves when a prompt exits.

Build it from a model path (``VLLMAsyncEngine.from_model(path, **engine_args)``) or pass an existing ``AsyncLLM``
(or anything with the same ``generate(prompt, sampling_params, request_id)`` async-iterator method and
``abort(request_id)``; the tests use a fake).
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

from reinforce_ada.generation.prompting import encode_prompt
from reinforce_ada.sampling.memory import prompt_key
from reinforce_ada.types import Completion, Prompt

logger = logging.getLogger(__name__)

__all__ = ["VLLMAsyncEngine"]

_INSTALL_HINT = "VLLMAsyncEngine needs vLLM, which is not installed: pip install reinforce-ada[vllm]"


def _import_vllm():
    try:
        import vllm
    except ImportError as err:
        raise ImportError(_INSTALL_HINT) from err
    return vllm


class VLLMAsyncEngine:
    """:class:`~reinforce_ada.sampling.streaming.AsyncEngine` over a vLLM ``AsyncLLM``."""

    def __init__(self, engine: Any, tokenizer: Any, *, max_tokens: int = 1024, temperature: float = 1.0,
                 top_p: float = 1.0, logprobs: bool = True, use_chat_template: bool = True,
                 sampling_params_cls: Any = None):
        if max_tokens <= 0 or temperature <= 0 or not 0 < top_p <= 1:
            raise ValueError("need max_tokens > 0, temperature > 0 and 0 < top_p <= 1")
        self.engine = engine
        self.tokenizer = tokenizer
        self.max_tokens, self.temperature, self.top_p = max_tokens, temperature, top_p
        self.logprobs = logprobs
        self.use_chat_template = use_chat_template
        self._sampling_params_cls = sampling_params_cls
        self._prompt_ids: dict[str, list[int]] = {}
        self.num_aborted = 0
        self.num_completed = 0

    @classmethod
    def from_model(cls, model_path: str, tokenizer: Any = None, **kwargs: Any) -> "VLLMAsyncEngine":
        """Build an ``AsyncLLM`` for ``model_path``; engine arguments (``gpu_memory_utilization``, ...) pass through."""
        vllm = _import_vllm()
        from vllm.v1.engine.async_llm import AsyncLLM

        own = {k: kwargs.pop(k) for k in ("max_tokens", "temperature", "top_p", "logprobs", "use_chat_template")
               if k in kwargs}
        engine = AsyncLLM.from_engine_args(vllm.AsyncEngineArgs(model=model_path, **kwargs))
        if tokenizer is None:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(model_path)
        return cls(engine, tokenizer, **own)

    def _params(self) -> Any:
        cls = self._sampling_params_cls
        if cls is None:
            cls = _import_vllm().SamplingParams
        kwargs: dict[str, Any] = dict(n=1, temperature=self.temperature, top_p=self.top_p, max_tokens=self.max_tokens,
                                      logprobs=0 if self.logprobs else None)
        try:
            from vllm.sampling_params import RequestOutputKind

            kwargs["output_kind"] = RequestOutputKind.FINAL_ONLY
        except ImportError:
            pass
        return cls(**kwargs)

    def _ids(self, prompt: Prompt) -> list[int]:
        key = prompt_key(prompt)
        ids = self._prompt_ids.get(key)
        if ids is None:
            ids = encode_prompt(self.tokenizer, prompt, self.use_chat_template)
            self._prompt_ids[key] = ids
        return ids

    async def complete(self, prompt: Prompt, request_id: str) -> Completion:
        inputs = {"prompt_token_ids": self._ids(prompt)}
        final = None
        try:
            async for output in self.engine.generate(inputs, self._params(), request_id):
                final = output
        except BaseException:
            if final is None or not getattr(final, "finished", False):
                self.num_aborted += 1
                result = self.engine.abort(request_id)
                if inspect.isawaitable(result):
                    await result
            raise
        if final is None or not final.outputs:
            raise RuntimeError(f"vLLM returned no output for request {request_id}")
        out = final.outputs[0]
        logprobs = None
        if self.logprobs and getattr(out, "logprobs", None):
            logprobs = [float(step[token].logprob) for step, token in zip(out.logprobs, out.token_ids)]
        self.num_completed += 1
        return Completion(prompt.prompt_id, out.text, token_ids=tuple(out.token_ids), logprobs=logprobs,
                          finish_reason="length" if out.finish_reason == "length" else "stop")
