"""The vLLM backends and what they share: the colocated engine (:mod:`.engine`, ``VLLMGenerator``), the ``AsyncLLM``
engine in a loop of its own (:mod:`.async_engine`, :mod:`.loop`), the settings checked before an engine is built
(:mod:`.checks`, :mod:`.platform`), the trainer's weights pushed into an engine (:mod:`.weights`) or through shared
memory (:mod:`.shared_weights` and vLLM's side, :mod:`.shm`), and a local vLLM server (:mod:`.serve`). vLLM itself is
imported only when an engine is built."""

from reinforce_ada.generation.vllm.async_engine import VLLMAsyncEngine
from reinforce_ada.generation.vllm.engine import VLLMGenerator

__all__ = ["VLLMAsyncEngine", "VLLMGenerator"]
