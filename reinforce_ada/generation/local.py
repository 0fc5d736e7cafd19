"""A generator for a model folder on disk, built the one way ``eval`` and ``select-prompts`` build it.

:func:`generator_for_folder` first loads only the tokenizer and the model's config and checks that every prompt plus
``max_new_tokens`` fits the model's context (:func:`~reinforce_ada.generation.prompting.check_prompts_fit`: a
one-line error naming ``--max-new-tokens``), then loads the weights (safetensors; bfloat16 on a GPU, float32 on the
CPU) and builds the backend.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from reinforce_ada.types import Prompt

__all__ = ["check_fit", "generator_for_folder"]


def check_fit(prompts: Mapping[str, Sequence[Prompt]], tokenizer: Any, context: int | None, max_new_tokens: int,
              use_chat_template: bool = True) -> None:
    """:func:`~reinforce_ada.generation.prompting.check_prompts_fit` with the prompts encoded as every backend
    encodes them."""
    from reinforce_ada.generation.prompting import check_prompts_fit, encode_prompt

    check_prompts_fit(prompts, lambda p: encode_prompt(tokenizer, p, use_chat_template), context, max_new_tokens)


def generator_for_folder(model_dir: str | Path, prompts: Mapping[str, Sequence[Prompt]], *, backend: str = "hf",
                         max_new_tokens: int, temperature: float = 1.0, top_p: float = 1.0,
                         use_chat_template: bool = True, seed: int | None = None, **options: Any) -> Any:
    """The ``backend`` generator (``hf`` or ``vllm``) for the model in ``model_dir``, after checking that
    ``prompts`` (description -> prompts, as :func:`check_prompts_fit` takes them) fit its context; ``options`` go to
    the backend."""
    from reinforce_ada.generation import get_generator
    from reinforce_ada.models.loading import context_length, load_pretrained, load_tokenizer

    model_dir = str(model_dir)
    tokenizer = load_tokenizer(model_dir)
    check_fit(prompts, tokenizer, context_length(model_dir), max_new_tokens, use_chat_template)
    settings = dict(max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p,
                    use_chat_template=use_chat_template, seed=seed, **options)
    if backend == "vllm":
        return get_generator("vllm", model_dir, tokenizer, **settings)
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model, tokenizer = load_pretrained(model_dir, "bfloat16" if device == "cuda" else "float32")
    return get_generator(backend, model.to(device), tokenizer, **settings)
