"""Sampling with a Hugging Face ``transformers`` model: the backend for CPUs, tests and small runs.

One call of :meth:`HFGenerator.generate` answers a whole round of the sampler:

1. each request is encoded once (:func:`~reinforce_ada.generation.prompting.encode_prompt`) and expanded into
   ``num_samples`` rows;
2. the rows are sorted by prompt length (less padding), cut into batches of at most ``max_batch_size`` rows and
   left-padded;
3. each batch is sampled with ``model.generate(do_sample=True)`` under ``torch.no_grad`` in eval mode (the model's
   train/eval mode is restored afterwards);
4. each row is cut after its first EOS token -- the EOS is kept in ``token_ids`` so the policy learns to stop --
   and turned back into a :class:`~reinforce_ada.types.Completion`, in request order.

Log-probabilities: ``Completion.logprobs[t]`` is ``log softmax(logits_t / temperature)[token_t]`` -- the model's
distribution after temperature and *before* top-p truncation, which is what a trainer recomputes from the same model
(with ``top_p=1``, the default, it is exactly the sampling distribution). They are recorded by a logits processor
that holds one ``(batch, vocab)`` row at a time instead of every step's logits.

Sampling settings of the model's own ``generation_config`` (``top_k``, ``repetition_penalty``, ...) are switched off
so that the samples follow the distribution described above.
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

from reinforce_ada.generation.base import GeneratorBase
from reinforce_ada.generation.prompting import check_sampling_params, encode_prompt
from reinforce_ada.sampling.protocols import GenerationRequest
from reinforce_ada.types import Completion

logger = logging.getLogger(__name__)

__all__ = ["HFGenerator"]

# Processors that ``model.generation_config`` may switch on and that would change the sampling distribution.
_NEUTRAL_SAMPLING = dict(top_k=0, typical_p=1.0, repetition_penalty=1.0, no_repeat_ngram_size=0, num_beams=1,
                         num_return_sequences=1, renormalize_logits=False)


def _eos_ids(model: Any, tokenizer: Any) -> list[int]:
    ids: list[int] = []
    for source in (getattr(getattr(model, "generation_config", None), "eos_token_id", None),
                   getattr(tokenizer, "eos_token_id", None)):
        for token in ([source] if isinstance(source, int) else list(source or [])):
            if token is not None and int(token) not in ids:
                ids.append(int(token))
    return ids


class HFGenerator(GeneratorBase):
    """:class:`~reinforce_ada.sampling.protocols.Generator` backed by ``model.generate`` (CPU or GPU: the model's).

    Args:
        model: a ``transformers`` causal LM (``PreTrainedModel``).
        tokenizer: its tokenizer; when it has no pad token, the EOS token pads.
        max_new_tokens: the most tokens sampled per completion (the EOS included).
        temperature: sampling temperature (> 0).
        top_p: nucleus sampling mass in (0, 1].
        max_batch_size: the most rows (prompt x sample) per ``model.generate`` call.
        use_chat_template: apply the tokenizer's chat template to plain-string prompts (see ``encode_prompt``).
        seed: when set, call ``i`` of :meth:`generate` samples from ``torch.manual_seed(seed + i)`` inside a forked
            RNG, so two generators built with the same seed give the same completions and the global RNG is left
            alone; when ``None``, the global RNG is used.
    """

    name = "hf"

    def __init__(self, model: Any, tokenizer: Any, *, max_new_tokens: int = 16, temperature: float = 1.0,
                 top_p: float = 1.0, max_batch_size: int = 256, use_chat_template: bool = True,
                 seed: int | None = None):
        check_sampling_params(max_new_tokens, temperature, top_p)
        if not isinstance(max_batch_size, int) or max_batch_size < 1:
            raise ValueError(f"max_batch_size must be a positive integer, got {max_batch_size!r}")
        if not callable(getattr(model, "generate", None)):
            raise TypeError(f"model must be a transformers causal LM with .generate(), got {type(model).__name__}")
        self.model = model
        self.tokenizer = tokenizer
        self.max_new_tokens = max_new_tokens
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.max_batch_size = max_batch_size
        self.use_chat_template = use_chat_template
        self.seed = seed
        self.num_calls = 0
        self.eos_token_ids = _eos_ids(model, tokenizer)
        if not self.eos_token_ids:
            raise ValueError("neither the tokenizer nor model.generation_config names an EOS token; "
                             "set tokenizer.eos_token so completions can end")
        pad = getattr(tokenizer, "pad_token_id", None)
        if pad is None:
            pad = getattr(getattr(model, "generation_config", None), "pad_token_id", None)
        if pad is None:
            pad = self.eos_token_ids[0]
            logger.info("the tokenizer has no pad token; padding with the EOS token (id %d)", pad)
        self.pad_token_id = int(pad)

    # -- the Generator protocol -------------------------------------------------------------------------------------
    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Completion]]:
        import torch

        encoded = [encode_prompt(self.tokenizer, r.prompt, self.use_chat_template) for r in requests]
        self._check_budget(requests, encoded)
        rows = [(i, len(encoded[i])) for i, r in enumerate(requests) for _ in range(r.num_samples)]
        rows.sort(key=lambda row: row[1])  # stable: samples of one request stay together and in order
        outputs: list[list[Completion]] = [[] for _ in requests]
        if not rows:
            return outputs

        seed = None if self.seed is None else self.seed + self.num_calls
        self.num_calls += 1
        device = self._device()
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad(), torch.random.fork_rng(devices=self._rng_devices(device), enabled=seed is not None):
                if seed is not None:
                    torch.manual_seed(seed)
                for start in range(0, len(rows), self.max_batch_size):
                    batch = rows[start:start + self.max_batch_size]
                    prompts = [encoded[i] for i, _ in batch]
                    for (i, _), completion in zip(batch, self._sample_batch(prompts, device)):
                        completion.prompt_id = requests[i].prompt.prompt_id
                        outputs[i].append(completion)
        finally:
            self.model.train(was_training)
        return outputs

    def load_weights(self, model: Any) -> None:
        """Sample from ``model`` from now on. The HF backend reads the live model, so there is nothing to copy."""
        self.model = model

    # -- internals --------------------------------------------------------------------------------------------------
    def _device(self):
        import torch

        try:
            return next(self.model.parameters()).device
        except (StopIteration, AttributeError):
            return torch.device("cpu")

    @staticmethod
    def _rng_devices(device) -> list:
        return [device.index if device.index is not None else 0] if device.type == "cuda" else []

    def _check_budget(self, requests: Sequence[GenerationRequest], encoded: list[list[int]]) -> None:
        for request in requests:
            if not isinstance(request.num_samples, int) or request.num_samples < 0:
                raise ValueError(f"request for prompt {request.prompt.prompt_id!r} has num_samples="
                                 f"{request.num_samples!r}; expected a non-negative integer")
        limit = getattr(getattr(self.model, "config", None), "max_position_embeddings", None)
        if not isinstance(limit, int):
            return
        for request, ids in zip(requests, encoded):
            if len(ids) + self.max_new_tokens > limit:
                raise ValueError(f"prompt {request.prompt.prompt_id!r} has {len(ids)} tokens; with max_new_tokens="
                                 f"{self.max_new_tokens} that exceeds the model's max_position_embeddings={limit}")

    def _sample_batch(self, prompts: list[list[int]], device) -> list[Completion]:
        import torch
        from transformers import LogitsProcessorList

        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), self.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, ids in enumerate(prompts):  # left padding: the prompts end where generation starts
            input_ids[row, width - len(ids):] = torch.tensor(ids, dtype=torch.long)
            attention_mask[row, width - len(ids):] = 1
        recorder = _SampledLogprobs(self.temperature)
        sequences = self.model.generate(
            input_ids=input_ids.to(device), attention_mask=attention_mask.to(device), do_sample=True,
            temperature=self.temperature, top_p=self.top_p, max_new_tokens=self.max_new_tokens,
            pad_token_id=self.pad_token_id, eos_token_id=self.eos_token_ids,
            logits_processor=LogitsProcessorList([recorder]), return_dict_in_generate=False, **_NEUTRAL_SAMPLING)
        generated = sequences[:, width:]  # (B, T)
        logprobs = recorder.finish(generated).cpu()  # (B, T)
        generated = generated.cpu()

        eos = torch.tensor(self.eos_token_ids, dtype=torch.long)
        is_eos = torch.isin(generated, eos)  # (B, T)
        completions = []
        for row in range(len(prompts)):
            hits = torch.nonzero(is_eos[row]).flatten()
            length = int(hits[0]) + 1 if len(hits) else generated.shape[1]
            token_ids = generated[row, :length].tolist()
            completions.append(Completion(
                prompt_id=None, text=self.tokenizer.decode(token_ids, skip_special_tokens=True), token_ids=token_ids,
                logprobs=logprobs[row, :length].tolist(), finish_reason="stop" if len(hits) else "length"))
        return completions


class _SampledLogprobs:
    """A logits processor that records ``log softmax(scores / T)`` at each sampled token, one step behind.

    At step ``t`` the processor sees the scores of step ``t`` and the token sampled at step ``t - 1`` (the last
    column of ``input_ids``), so it only keeps the previous step's ``(B, V)`` log-probabilities. Custom processors
    run before ``generate``'s temperature/top-p warpers, so ``scores`` are the model's logits here.
    """

    def __init__(self, temperature: float):
        self.temperature = temperature
        self.previous = None  # (B, V) log-probs of the last step seen
        self.steps: list = []  # each (B,)

    def __call__(self, input_ids, scores):
        import torch

        if self.previous is not None:
            self.steps.append(self.previous.gather(1, input_ids[:, -1:]).squeeze(1))
        self.previous = torch.log_softmax(scores.float() / self.temperature, dim=-1)
        return scores

    def finish(self, generated):
        """``(B, T)`` log-probs of ``generated`` (the ``(B, T)`` sampled tokens)."""
        import torch

        if self.previous is not None:
            self.steps.append(self.previous.gather(1, generated[:, -1:]).squeeze(1))
        if len(self.steps) != generated.shape[1]:
            raise RuntimeError(f"recorded {len(self.steps)} log-prob steps for {generated.shape[1]} generated tokens; "
                               "this transformers version calls logits processors differently than expected")
        return torch.stack(self.steps, dim=1) if self.steps else torch.zeros(generated.shape)
