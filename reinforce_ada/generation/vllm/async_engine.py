"""vLLM's ``AsyncLLM`` behind the streaming sampler's asynchronous engine interface (GPU; vLLM is optional).

Each call of :meth:`VLLMAsyncEngine.complete` is one vLLM request with ``n=1`` on the prompt's token ids from
:func:`~reinforce_ada.generation.prompting.encode_prompt` (the ids the HF backend and the trainer use), with
``output_kind=FINAL_ONLY`` so only the finished sequence comes back. vLLM's scheduler batches all outstanding
requests continuously; requests of the same prompt share its KV prefix through prefix caching.

Cancellation: when the awaiting task is cancelled, ``AsyncLLM.generate`` is interrupted and the request is aborted
(``engine.abort(request_id)``) so its sequence leaves the running batch at the next scheduler step -- the work the
streaming sampler saves when a prompt exits.

One event loop for the engine's life: an ``AsyncLLM`` is bound to the event loop it first ran in (its output
handler is a task of that loop), so the engine owns a long-lived loop in a background thread and every call runs
there (:class:`~reinforce_ada.generation.vllm.loop.EngineLoop`): :meth:`VLLMAsyncEngine.run_in_loop` submits a
coroutine (``asyncio.run_coroutine_threadsafe``) and waits for it. The
streaming sampler's ``sample()`` uses it (instead of a new ``asyncio.run`` loop per step, which killed the engine at
the second step); the synchronous :meth:`generate` (evaluation) and :meth:`load_weights` run there too. :meth:`close`
shuts the engine down, then stops the loop.

A dead engine (vLLM's ``EngineDeadError``, or ``engine.errored``) is not a transient fault: :meth:`complete` raises
:class:`~reinforce_ada.sampling.protocols.FatalGenerationError`, which the streaming sampler never retries.

Weights: ``AsyncLLM`` always runs its engine core and worker in processes of their own. An engine built here
(:meth:`from_model`, :meth:`for_model`) takes the trainer's weights through vLLM's weight-transfer API with this
library's shared-memory backend (:mod:`~reinforce_ada.generation.vllm.shared_weights`): :meth:`load_weights` copies the
parameters into a file in ``/dev/shm`` whose layout is fixed at the first sync, the worker maps it once and loads the
tensors from it in place (layer-wise reload, tied layers re-packed, as the colocated path does), then the prefix
cache is reset -- no pickled model per step. An ``AsyncLLM`` built elsewhere (without that backend) is sent the
weights as one ``torch.save`` payload through ``collective_rpc``
(:func:`~reinforce_ada.generation.vllm.weights.pack_weights`; raw tensors fail on the
engine core's second hop to its worker), which needs ``VLLM_ALLOW_INSECURE_SERIALIZATION=1`` and copies the whole
model through the engine core every step.

Build it from a model path (``VLLMAsyncEngine.from_model(path, **engine_args)``), from the trainer's model
(:meth:`for_model`, which writes an in-memory model to a folder it owns, like the colocated generator), or pass an
existing ``AsyncLLM`` (or anything with the same ``generate(prompt, sampling_params, request_id)`` async-iterator
method and ``abort(request_id)``; the tests use a fake).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
from typing import Any, Coroutine, Sequence, TypeVar

from reinforce_ada.generation.base import GeneratorBase
from reinforce_ada.generation.prompting import encode_prompt
from reinforce_ada.generation.vllm.loop import EngineLoop
from reinforce_ada.generation.vllm.platform import current_platform, import_vllm
from reinforce_ada.generation.vllm.weights import load_packed_weights_on_worker, pack_weights
from reinforce_ada.sampling.memory import prompt_key
from reinforce_ada.sampling.protocols import FatalGenerationError, GenerationRequest
from reinforce_ada.types import Completion, Prompt

T = TypeVar("T")

logger = logging.getLogger(__name__)

__all__ = ["VLLMAsyncEngine", "is_engine_dead"]

def is_engine_dead(error: BaseException, engine: Any = None) -> bool:
    """Whether ``error`` says the engine is dead: vLLM's ``EngineDeadError`` (matched by class name, so any vLLM
    version and the tests' fakes agree), or any error from an engine whose ``errored`` flag is up."""
    if any(cls.__name__ == "EngineDeadError" for cls in type(error).__mro__):
        return True
    return bool(getattr(engine, "errored", False))


class VLLMAsyncEngine(GeneratorBase):
    """:class:`~reinforce_ada.sampling.streaming.AsyncEngine` over a vLLM ``AsyncLLM``, with the event loop it lives
    in (:meth:`run_in_loop`); also a synchronous :class:`~reinforce_ada.sampling.protocols.Generator` (:meth:`generate`,
    for evaluation) and a trainer backend (:meth:`load_weights`, :meth:`close`).

    ``loop``: the :class:`EngineLoop` the engine lives in (``None``: a new one, owned and closed by :meth:`close`).
    ``weight_transfer``: how :meth:`load_weights` reaches the worker -- ``"shared_memory"`` (an engine built with
    the shared-memory backend, as :meth:`from_model` builds it) or ``"rpc"`` (one pickled payload per sync, any
    engine); ``weight_sync``: the rpc path's load path (``direct`` or ``reload``, see
    :mod:`~reinforce_ada.generation.vllm.weights`); ``owned_folder``: a temporary checkpoint folder removed by
    :meth:`close`.
    """

    name = "vllm"

    def __init__(self, engine: Any, tokenizer: Any, *, max_tokens: int = 1024, temperature: float = 1.0,
                 top_p: float = 1.0, logprobs: bool = True, use_chat_template: bool = True,
                 sampling_params_cls: Any = None, loop: EngineLoop | None = None, weight_sync: str = "reload",
                 weight_transfer: str = "rpc", owned_folder: Any = None):
        if weight_transfer not in ("shared_memory", "rpc"):
            raise ValueError(f"weight_transfer must be 'shared_memory' or 'rpc', got {weight_transfer!r}")
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
        self.weight_sync = weight_sync
        self.weight_transfer = weight_transfer
        self._shared: Any = None  # the SharedWeights file, made at the first shared-memory sync
        self._owned_folder = owned_folder
        self._owns_loop = loop is None
        self.loop = loop if loop is not None else EngineLoop()

    @classmethod
    def from_model(cls, model_path: str, tokenizer: Any = None, **kwargs: Any) -> "VLLMAsyncEngine":
        """Build an ``AsyncLLM`` for ``model_path`` that takes weights through shared memory; engine arguments
        (``gpu_memory_utilization``, ...) pass through."""
        vllm = import_vllm("VLLMAsyncEngine")
        from vllm.v1.engine.async_llm import AsyncLLM

        from reinforce_ada.generation.vllm.shared_weights import BACKEND

        kwargs.setdefault("weight_transfer_config", {"backend": BACKEND})
        own_transfer = kwargs["weight_transfer_config"] == {"backend": BACKEND}
        own = {k: kwargs.pop(k) for k in ("max_tokens", "temperature", "top_p", "logprobs", "use_chat_template")
               if k in kwargs}
        for name in ("weight_sync", "owned_folder"):
            if name in kwargs:
                own[name] = kwargs.pop(name)
        loop = EngineLoop()

        async def build() -> Any:  # the engine's output handler is started in, and bound to, this loop
            return AsyncLLM.from_engine_args(vllm.AsyncEngineArgs(model=model_path, **kwargs))

        try:
            engine = loop.run(build())
        except Exception as err:  # vLLM's own start failures: one line naming the setting
            loop.close()
            from reinforce_ada.generation.vllm.checks import engine_start_error

            raise engine_start_error(err, model_path) from err
        except BaseException:
            loop.close()
            raise
        if tokenizer is None:  # the library's loader: the folder's declared tokenizer class (the built-in char one)
            from reinforce_ada.models.loading import load_tokenizer

            tokenizer = load_tokenizer(model_path)
        built = cls(engine, tokenizer, loop=loop, weight_transfer="shared_memory" if own_transfer else "rpc", **own)
        built.sequences_share_compute = bool(current_platform(vllm).is_cpu())
        return built

    @classmethod
    def for_model(cls, model: Any, tokenizer: Any, *, model_path: str | None = None, max_new_tokens: int = 16,
                  temperature: float = 1.0, top_p: float = 1.0, use_chat_template: bool = True,
                  gpu_memory_utilization: float | None = None, dtype: str = "auto", max_model_len: int | None = None,
                  weight_sync: str = "auto", enable_prefix_caching: bool = True,
                  logprobs_mode: str | None = "processed_logprobs", **engine_kwargs: Any,
                  ) -> "VLLMAsyncEngine":
        """The trainer's streaming backend: an ``AsyncLLM`` on ``model``'s checkpoint (or a copy written to a folder
        this engine owns), with the platform's defaults of the colocated generator (RAM share 0.1 on the CPU, the
        ``reload`` weight sync there, ``max_model_len`` from the model)."""
        from reinforce_ada.generation.prompting import check_sampling_params
        from reinforce_ada.generation.vllm.platform import DEFAULT_MEMORY_SHARE
        from reinforce_ada.generation.vllm.checks import check_engine_setup
        from reinforce_ada.generation.vllm.weights import servable_checkpoint, weight_sync_path

        check_sampling_params(max_new_tokens, temperature, top_p)
        platform = current_platform(import_vllm("VLLMAsyncEngine"))
        path = weight_sync_path(weight_sync, platform)
        if gpu_memory_utilization is None:
            gpu_memory_utilization = DEFAULT_MEMORY_SHARE["cpu" if platform.is_cpu() else "gpu"]
        live = None if isinstance(model, (str, os.PathLike)) else model
        if max_model_len is None and live is not None:
            max_model_len = getattr(getattr(live, "config", None), "max_position_embeddings", None)
        check_engine_setup(platform, model_path or model, memory_share=gpu_memory_utilization, dtype=dtype,
                           max_model_len=max_model_len, in_this_process=False)  # AsyncLLM: its own processes
        checkpoint, folder = servable_checkpoint(model, tokenizer, model_path)
        if logprobs_mode is not None:  # log-probs after temperature / top-p, what the trainer computes
            engine_kwargs["logprobs_mode"] = logprobs_mode
        try:
            return cls.from_model(checkpoint, tokenizer, max_tokens=max_new_tokens, temperature=temperature,
                                  top_p=top_p, use_chat_template=use_chat_template, weight_sync=path,
                                  owned_folder=folder, gpu_memory_utilization=gpu_memory_utilization, dtype=dtype,
                                  max_model_len=max_model_len, enable_prefix_caching=enable_prefix_caching,
                                  **engine_kwargs)
        except BaseException:
            if folder is not None:
                folder.cleanup()
            raise

    # -- the engine's loop ------------------------------------------------------------------------------------------
    def run_in_loop(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the engine's event loop and return its result (the streaming sampler's ``sample()``)."""
        return self.loop.run(coro)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Completion]]:
        """The synchronous :class:`~reinforce_ada.sampling.protocols.Generator`: every sample one request, all in
        flight at once on the engine's loop."""
        counter = self._calls = getattr(self, "_calls", 0) + 1

        async def all_samples() -> list[list[Completion]]:
            # every sample a task now: a coroutine handed to gather only later would start only then (prompt by prompt)
            groups = [[asyncio.ensure_future(self.complete(r.prompt, f"gen-{counter}-{i}-{j}"))
                       for j in range(r.num_samples)] for i, r in enumerate(requests)]
            try:
                return [list(await asyncio.gather(*group)) for group in groups]
            finally:
                for task in (t for group in groups for t in group if not t.done()):
                    task.cancel()

        return self.run_in_loop(all_samples())

    def load_weights(self, model: Any) -> int:
        """Push ``model``'s parameters into the engine's worker (by :attr:`weight_transfer`) and reset the prefix
        cache; return how many were pushed."""
        if self.weight_transfer == "rpc":
            from reinforce_ada.generation.vllm.weights import named_weights

            weights = list(named_weights(model))
            payload = pack_weights(weights)

            async def push() -> None:
                await self.engine.collective_rpc(load_packed_weights_on_worker, args=(payload, self.weight_sync))
                await self.engine.reset_prefix_cache()  # cached KV blocks were computed with the old weights

            self.run_in_loop(push())
            return len(weights)
        from vllm.distributed.weight_transfer.base import WeightTransferInitRequest, WeightTransferUpdateRequest

        from reinforce_ada.generation.vllm.shared_weights import SharedWeights

        first = self._shared is None
        if first:
            self._shared = SharedWeights(model)
        self._shared.write(model)

        async def update() -> None:
            if first:  # the worker maps the file once
                await self.engine.init_weight_transfer_engine(WeightTransferInitRequest(self._shared.init_info()))
            await self.engine.start_weight_update()
            await self.engine.update_weights(WeightTransferUpdateRequest(self._shared.update_info()))
            await self.engine.finish_weight_update()
            await self.engine.reset_prefix_cache()  # cached KV blocks were computed with the old weights

        self.run_in_loop(update())
        return len(self._shared.names)

    def close(self) -> None:
        """Shut the engine down, stop its loop (when this wrapper owns it) and remove its folder; idempotent."""
        engine = self.__dict__.pop("engine", None)
        if engine is not None and callable(getattr(engine, "shutdown", None)):
            if self.loop.closed:
                engine.shutdown()
            else:  # AsyncLLM stops the engine core before it cancels its output handler, which then sees the core
                # die and logs "AsyncLLM output_handler failed ... EngineDeadError": cancel the handler first
                async def shutdown() -> None:
                    handler = getattr(engine, "output_handler", None)
                    if isinstance(handler, asyncio.Future) and not handler.done():
                        handler.cancel()
                        await asyncio.gather(handler, return_exceptions=True)
                    engine.shutdown()

                self.loop.run(shutdown())
            # AsyncLLM.__del__ shuts it down again whenever it is collected -- at interpreter exit, once vLLM's
            # module globals are gone, that is "Exception ignored in AsyncLLM.__del__ ... TypeError": it is done
            engine.shutdown = lambda *args, **kwargs: None
        if self._owns_loop:
            self.loop.close()
        shared, self._shared = self._shared, None
        if shared is not None:
            shared.close()
        folder, self._owned_folder = self._owned_folder, None
        if folder is not None:
            folder.cleanup()

    def _params(self) -> Any:
        cls = self._sampling_params_cls
        if cls is None:
            cls = import_vllm("VLLMAsyncEngine").SamplingParams
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
        except BaseException as err:
            dead = isinstance(err, Exception) and is_engine_dead(err, self.engine)
            if not dead and (final is None or not getattr(final, "finished", False)):
                self.num_aborted += 1
                result = self.engine.abort(request_id)
                if inspect.isawaitable(result):
                    await result
            if dead:
                raise FatalGenerationError(f"the vLLM engine is dead ({type(err).__name__}: {err}); "
                                           "it cannot serve another request") from err
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
