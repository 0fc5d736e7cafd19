"""The OpenAI-compatible client retries by the library's one rule (``sampling.protocols.is_transient``), not by a
list of its own: each failed attempt is raised as an error the rule classifies, and the rule alone decides whether
another attempt is made."""

import pytest

pytest.importorskip("httpx")

from reinforce_ada.generation.server.answers import ServerRequestError
from reinforce_ada.generation.server.client import OpenAICompletionsEngine
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
    monkeypatch.setattr("reinforce_ada.generation.server.client.is_transient",
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


@pytest.mark.fault("an OpenAI-compatible server's answer that does not fit the request (the wrong number of "
                   "choices, `text: null`, fewer log-probs than token ids)",
                   "ServerAnswerError (fatal) at the first attempt, never retried (it was retried as a malformed body)")
@pytest.mark.parametrize("answer", ["wrong_n", "text_null", "logprob_mismatch"])
def test_an_answer_that_does_not_fit_the_request_is_not_retried(answer):
    from reinforce_ada.generation.server.answers import ServerAnswerError

    with FakeOpenAIServer(lambda index, request_id, attempt: answer) as server:
        engine = client(server.url)
        with pytest.raises(ServerAnswerError, match="the server's answer does not fit the request") as info:
            engine.generate([GenerationRequest(Prompt(0, "q"), 2)])
    assert engine.num_requests == 1 and list(server.attempts.values()) == [1] and not is_transient(info.value)


def select_prompts(tmp_path, url, *options):
    """``reinforce-ada select-prompts --base-url URL`` on four prompts, in this process: (exit status, stderr)."""
    import json

    from reinforce_ada import cli

    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"{i}+1=", "answer": str(i + 1)}) + "\n" for i in range(4)))
    served = [] if "--served-model" in options else ["--served-model", "fake-model"]  # the fakes list no model
    code = cli.main(["select-prompts", "--base-url", url, "--data", str(data), "--out", str(tmp_path / "out.jsonl"),
                     "-k", "2", *served, *options])
    return code


def the_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert [line for line in lines if line.startswith("error")] == lines[-1:] and "Traceback" not in err, err
    return lines[-1]


@pytest.mark.fault("select-prompts --base-url against a server whose answers do not fit the request",
                   "exit 3 in one line naming the fault; each request sent once (it was retried 15 times per prompt, "
                   "then a traceback)")
@pytest.mark.parametrize("answer", ["wrong_n", "text_null", "logprob_mismatch"])
def test_select_prompts_on_a_server_with_unfitting_answers_ends_in_one_line(tmp_path, capsys, answer):
    with FakeOpenAIServer(lambda index, request_id, attempt: answer) as server:
        code = select_prompts(tmp_path, server.url)
    line = the_error_line(capsys.readouterr().err)
    assert code == 3 and line.startswith("error: select-prompts: generation failed: request ")
    assert "the server's answer does not fit the request" in line and "not retried" in line
    assert sorted(server.attempts.values()) == [1, 1, 1, 1]  # one request per prompt, none sent again
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.fault("select-prompts --base-url against a server that never answers",
                   "each request ends at --timeout, tried --retries more times; then exit 3 in one line naming the "
                   "timeout (it waited forever: no timeout option)")
def test_select_prompts_on_a_hanging_server_ends_at_its_timeout_in_one_line(tmp_path, capsys):
    with FakeOpenAIServer(lambda index, request_id, attempt: "hold") as server:
        code = select_prompts(tmp_path, server.url, "--timeout", "0.2", "--retries", "1")
    line = the_error_line(capsys.readouterr().err)
    assert code == 3 and line.startswith("error: select-prompts: generation failed: ")
    assert "no complete answer within timeout_s=0.2" in line
    assert sorted(server.attempts.values()) == [2, 2, 2, 2]  # the first try and --retries 1 more, per request
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.fault("select-prompts --base-url against a server that accepts connections and never answers anything, "
                   "or given without a scheme (127.0.0.1:9)",
                   "one line: the unanswered /v1/models named after --server-dead-after (default 60 s; it was "
                   "silent for up to --timeout 600 s x 3 tries), or the missing http:// at once (it was a ValueError "
                   "traceback)")
def test_select_prompts_names_a_server_that_answers_nothing_within_its_dead_after(tmp_path, capsys):
    import socket

    with socket.socket() as listening:  # the kernel accepts connections; nothing ever reads or answers them
        listening.bind(("127.0.0.1", 0))
        listening.listen(16)
        url = f"http://127.0.0.1:{listening.getsockname()[1]}"
        code = select_prompts(tmp_path, url, "--served-model", "m", "--server-dead-after", "0.5")
    line = the_error_line(capsys.readouterr().err)
    assert code == 2 and line == f"error: cannot reach the server at {url}: no answer to /v1/models within 0.5 s " \
                                 f"(ReadTimeout)"
    assert select_prompts(tmp_path, "127.0.0.1:9") == 2
    assert the_error_line(capsys.readouterr().err) == ("error: --base-url must start with http:// or https:// (got "
                                                       "'127.0.0.1:9'); did you mean 'http://127.0.0.1:9'?")


def test_select_prompts_stops_when_the_server_falls_silent_after_the_start(tmp_path, capsys):
    with FakeOpenAIServer(lambda index, request_id, attempt: "hold", health="hold") as server:
        code = select_prompts(tmp_path, server.url, "--server-dead-after", "0.5")
    line = the_error_line(capsys.readouterr().err)
    assert code == 3 and line.startswith("error: select-prompts: generation failed: the server at ")
    assert "has answered nothing for" in line and "server_dead_after=0.5 s" in line
    assert not (tmp_path / "out.jsonl").exists()
