"""A :class:`~reinforce_ada.sampling.protocols.Generator` that generates with a ``GRPOTrainer``'s own machinery.

Every round the sampler asks for ``num_samples`` completions of each still-active prompt. This adapter expands the
requests into one row per completion (the prompt's token ids repeated) and hands the rows to
``GRPOTrainer._generate_single_turn(rows, None, {}, num_generations=1)`` -- the same call TRL makes, so plain
``transformers`` generation, continuous batching, vLLM *server* mode (main process only, after a gather) and vLLM
*colocate* mode all work, with TRL's sampling parameters, weight syncing and per-token log-probabilities.

**Every process takes part in every round.** Processes hold different prompts, which need different numbers of
rounds and completions, but several backends are collective: vLLM server mode gathers all rows to the main process
and slices the answer back assuming equal row counts; colocate mode with tensor parallelism all-gathers within the TP
group; DeepSpeed ZeRO-3 / FSDP gather parameters around (or inside) generation. So each round is::

    R = all_reduce_max(number of rows this process needs)      # 0 once a process's sampler has finished
    if R == 0: every process is done -> stop
    collective backend: pad this process's rows to R with a filler prompt, generate, drop the filler completions
    otherwise:          generate this process's own rows (none: skip)

A process whose prompts have all exited calls :meth:`TRLGenerator.finish`, which keeps joining rounds with 0 rows
until the all-reduce returns 0 -- i.e. until every process has finished. All processes therefore run the same number
of rounds (the maximum over processes) and enter every collective the same number of times. The filler is the first
prompt of the process's batch (a realistic length; its completions are discarded). Plain generation under DDP and
colocate mode without tensor parallelism are not collective, so they generate no filler. With one process nothing is
reduced or padded.
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

from reinforce_ada.sampling.protocols import GenerationRequest
from reinforce_ada.types import Completion

logger = logging.getLogger(__name__)

PROMPT_IDS_KEY = "trl_prompt_ids"
"""``Prompt.metadata`` key holding the prompt's token ids (tokenized by TRL's ``_tokenize_prompts``)."""


def eos_token_ids(trainer: Any) -> list[int]:
    """The token ids that end a completion: ``trainer.eos_token_ids`` (TRL >= 1.14.2), else the tokenizer's EOS."""
    ids = getattr(trainer, "eos_token_ids", None)
    return list(ids) if ids is not None else [trainer._tokenizer.eos_token_id]


class TRLGenerator:
    """Generate through ``trainer._generate_single_turn``; keep all processes in lock-step (see module doc)."""

    def __init__(self, trainer: Any):
        self.trainer = trainer
        self.filler_prompt_ids: list[int] | None = None
        """Token ids used to pad this process's rows in a round (set by the trainer at the start of each step)."""
        self.num_rounds = 0
        """Generation rounds this process took part in since :meth:`reset` (including :meth:`finish` rounds)."""
        self.num_filler_rows = 0
        """Rows generated only to keep the processes in step, since :meth:`reset`."""
        self.num_filler_tokens = 0
        """Prompt + completion tokens of those rows (generated, then discarded), since :meth:`reset`."""

    @property
    def num_processes(self) -> int:
        return self.trainer.accelerator.num_processes

    def reset(self, filler_prompt_ids: list[int]) -> None:
        self.filler_prompt_ids = list(filler_prompt_ids)
        self.num_rounds = 0
        self.num_filler_rows = 0
        self.num_filler_tokens = 0

    # -- Generator protocol -----------------------------------------------------------------------------------------
    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Completion]]:
        rows: list[list[int]] = []
        for request in requests:
            prompt_ids = request.prompt.metadata.get(PROMPT_IDS_KEY)
            if prompt_ids is None:
                raise KeyError(f"prompt {request.prompt.prompt_id!r} has no metadata[{PROMPT_IDS_KEY!r}]; "
                               "TRLGenerator needs the prompt's token ids")
            rows.extend([list(prompt_ids)] * request.num_samples)
        if not rows:
            raise ValueError("TRLGenerator.generate got no rows to generate; use finish() to idle")
        target = self._agree(len(rows))
        completion_ids, logprobs = self._generate_rows(rows, target)
        eos = set(eos_token_ids(self.trainer))
        texts = self.trainer.processing_class.batch_decode(completion_ids, skip_special_tokens=True)
        outputs: list[list[Completion]] = []
        start = 0
        for request in requests:
            completions = []
            for j in range(start, start + request.num_samples):
                ids = list(completion_ids[j])
                completions.append(Completion(
                    prompt_id=request.prompt.prompt_id, text=texts[j], token_ids=ids,
                    logprobs=list(logprobs[j]) if logprobs is not None else None,
                    finish_reason="stop" if ids and ids[-1] in eos else "length"))
            outputs.append(completions)
            start += request.num_samples
        return outputs

    def finish(self) -> None:
        """Idle in lock-step until every process's sampler has finished (returns at once with one process)."""
        while (target := self._agree(0)) > 0:
            self._generate_rows([], target)

    # -- internals --------------------------------------------------------------------------------------------------
    def _agree(self, num_rows: int) -> int:
        """The most rows any process needs this round (collective when there are several processes)."""
        if self.num_processes == 1:
            return num_rows
        import torch

        accelerator = self.trainer.accelerator
        counts = accelerator.gather(torch.tensor([num_rows], dtype=torch.long, device=accelerator.device))
        return int(counts.max().item())

    def generation_is_collective(self) -> bool:
        """Whether every process must make the same generation call with the same number of rows."""
        trainer = self.trainer
        if self.num_processes == 1:
            return False
        if trainer.is_fsdp_enabled:
            return True
        if trainer.is_deepspeed_enabled:  # ZeRO-3 gathers parameters around / inside generation; stages 1-2 do not
            plugin = getattr(trainer.accelerator.state, "deepspeed_plugin", None)
            if getattr(plugin, "zero_stage", 3) == 3:
                return True
        if trainer.use_vllm:
            vllm = trainer.vllm_generation
            return vllm.mode == "server" or vllm.tensor_parallel_size > 1
        return False

    def _generate_rows(self, rows: list[list[int]], target: int) -> tuple[list[list[int]], list[list[float]] | None]:
        """Generate one completion per row; pad to ``target`` rows when the backend is collective (module doc)."""
        num_real = len(rows)
        self.num_rounds += 1
        if not self.generation_is_collective():
            if not rows:
                return [], None
        elif num_real < target:
            if self.filler_prompt_ids is None:
                raise RuntimeError("TRLGenerator.reset(filler_prompt_ids) must be called before a multi-process step")
            rows = rows + [self.filler_prompt_ids] * (target - num_real)
            self.num_filler_rows += target - num_real
        completion_ids, logprobs = self.trainer._generate_single_turn(rows, None, {}, 1)
        self.num_filler_tokens += sum(len(rows[j]) + len(completion_ids[j]) for j in range(num_real, len(rows)))
        completion_ids = [list(ids) for ids in completion_ids[:num_real]]
        logprobs = [list(lp) for lp in logprobs[:num_real]] if logprobs is not None else None
        return completion_ids, logprobs


def use_valid_vllm_reload(trainer: Any) -> bool:
    """In TRL's vLLM *colocate* mode on vLLM's CPU platform, sync the weights by vLLM's layer-wise reload instead of
    TRL's direct ``load_weights``; whether it did.

    TRL pushes each parameter straight into the engine's model (``model_runner.model.load_weights``: every engine
    parameter's ``weight_loader``). That is valid where the engine keeps its parameters as loaded -- GPUs, which are
    left to TRL -- but vLLM's CPU backend repacks every linear weight for its GEMM kernel after loading and leaves a
    parameter without a ``weight_loader``, so step 1 fails with ``'Parameter' object has no attribute
    'weight_loader'``. There the same ``(name, tensor)`` pairs TRL reads (``_iter_named_params``: DeepSpeed, FSDP and
    PEFT handled by TRL) go through :func:`~reinforce_ada.generation.vllm.weights.load_into_engine` by the ``reload``
    path this library's own generator uses (layer-wise reload, tied layers re-packed), then the prefix cache is
    reset, as TRL does."""
    vllm_generation = getattr(trainer, "vllm_generation", None)
    if not getattr(trainer, "use_vllm", False) or getattr(vllm_generation, "mode", None) != "colocate":
        return False
    from reinforce_ada.generation.vllm.weights import load_into_engine, weight_sync_path

    try:
        if weight_sync_path("auto") != "reload":
            return False
    except ImportError:  # no vLLM platform to ask (a test's stand-in engine): TRL's path
        return False

    def sync_weights() -> None:
        runner = vllm_generation.llm.llm_engine.model_executor.driver_worker.model_runner
        load_into_engine(runner, vllm_generation._iter_named_params(), "reload")
        vllm_generation.llm.reset_prefix_cache()  # cached KV blocks were computed with the old weights

    vllm_generation.sync_weights = sync_weights
    return True
