"""The OpenAI-compatible client retries by the library's one rule (``sampling.protocols.is_transient``), not by a
list of its own: each failed attempt is raised as an error the rule classifies, and the rule alone decides whether
another attempt is made."""

import pytest

pytest.importorskip("httpx")

from reinforce_ada.generation.openai_server import OpenAICompletionsEngine, ServerRequestError
from reinforce_ada.sampling.protocols import GenerationError, GenerationRequest, is_transient
from reinforce_ada.types import Prompt

from streaming_fakes import FakeOpenAIServer


def client(url):
    return OpenAICompletionsEngine(url, "fake-model", max_tokens=4, max_attempts=3, backoff_s=0.001,
                                   backoff_max_s=0.001)


@pytest.mark.parametrize("failure", ["500", "429", "drop", "garbage"])
def test_a_transient_failure_is_tried_again_because_the_rule_says_so(failure, monkeypatch):
    first_fails = lambda index, request_id, attempt: failure if attempt == 1 else "ok"  # noqa: E731
    with FakeOpenAIServer(first_fails) as server:
        engine = client(server.url)
        [[completion]] = engine.generate([GenerationRequest(Prompt(0, "q"), 1)])
    assert engine.num_requests == 2 and list(server.attempts.values()) == [2]
    seen = []
    monkeypatch.setattr("reinforce_ada.generation.openai_server.is_transient",
                        lambda err: seen.append(err) or False)  # the rule changed: nothing is transient
    with FakeOpenAIServer(first_fails) as server:
        engine = client(server.url)
        with pytest.raises(GenerationError):
            engine.generate([GenerationRequest(Prompt(0, "q"), 1)])
    assert engine.num_requests == 1 and len(seen) == 1 and is_transient(seen[0])


def test_a_refused_request_is_a_fatal_error_the_rule_never_retries():
    with FakeOpenAIServer(lambda index, request_id, attempt: "400") as server:
        engine = client(server.url)
        with pytest.raises(ServerRequestError) as info:
            engine.generate([GenerationRequest(Prompt(0, "q"), 1)])
    assert engine.num_requests == 1 and not is_transient(info.value)
