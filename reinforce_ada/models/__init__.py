"""Built-in models: the tiny character-level Qwen2 used by the CPU demo and the tests."""

from reinforce_ada.models.tiny import TINY_VOCAB, build_char_tokenizer, build_tiny_model

__all__ = ["TINY_VOCAB", "build_char_tokenizer", "build_tiny_model"]
