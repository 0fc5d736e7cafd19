"""The backend for a running OpenAI-compatible server: the client (:mod:`.client`, ``OpenAICompletionsEngine``:
requests, retries, deadlines), how its answers are read (:mod:`.answers`), when a silent server is dead
(:mod:`.liveness`), the trainer's generator on it (:mod:`.generator`, ``ServerGenerator``) and the weight sync into
a vLLM server (:mod:`.weights`). httpx is imported at the first request."""

from reinforce_ada.generation.server.client import OpenAICompletionsEngine
from reinforce_ada.generation.server.generator import ServerGenerator, served_model_name, server_generator

__all__ = ["OpenAICompletionsEngine", "ServerGenerator", "served_model_name", "server_generator"]
