"""Test doubles for the streaming sampler: a token-by-token fake engine and a fake OpenAI-compatible HTTP server."""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

from reinforce_ada.types import Completion, Prompt


def unit_hash(*parts: object) -> float:
    """A deterministic number in [0, 1) from the parts."""
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def sample_name(request_id: str) -> str:
    """``"<prompt_id>-<index>"``: the request id without its random per-step prefix (keeps the fakes deterministic)."""
    return request_id.split("-", 1)[1]


def label_for(prompt: Prompt, request_id: str) -> str:
    """``"1"`` with probability ``prompt.metadata["pass_rate"]`` (deterministic in the prompt and sample index)."""
    return "1" if unit_hash("label", sample_name(request_id)) < prompt.metadata["pass_rate"] else "0"


def text_verifier(prompts, completions):
    return [1.0 if c.text.split("|")[0] == "1" else 0.0 for c in completions]


class TokenEngine:
    """An async engine that generates one token per event-loop turn and logs every token.

    ``log`` is the sequence of events: ``("token", prompt_id)`` for each token and ``("exit", prompt_id)`` written by
    the test's scheduler hook, so "tokens generated for a prompt after it exited" is a count over the log.
    """

    def __init__(self, min_tokens: int = 3, max_tokens: int = 30):
        self.min_tokens, self.max_tokens = min_tokens, max_tokens
        self.log: list[tuple[str, object]] = []
        self.tokens: Counter = Counter()
        self.started: Counter = Counter()
        self.finished: Counter = Counter()
        self.request_ids: list[str] = []

    async def complete(self, prompt: Prompt, request_id: str) -> Completion:
        self.request_ids.append(request_id)
        self.started[prompt.prompt_id] += 1
        length = self.min_tokens + int(unit_hash("len", sample_name(request_id)) * (self.max_tokens - self.min_tokens + 1))
        for _ in range(length):
            await asyncio.sleep(0)
            self.log.append(("token", prompt.prompt_id))
            self.tokens[prompt.prompt_id] += 1
        self.finished[prompt.prompt_id] += 1
        return Completion(prompt.prompt_id, f"{label_for(prompt, request_id)}|{request_id}")

    def tokens_after_exit(self) -> dict[object, int]:
        exited: set = set()
        after: Counter = Counter()
        for kind, prompt_id in self.log:
            if kind == "exit":
                exited.add(prompt_id)
            elif prompt_id in exited:
                after[prompt_id] += 1
        return dict(after)


class SteppedTokenEngine(TokenEngine):
    """:class:`TokenEngine`'s samples (same lengths and labels) on the stepped interface the colocated vLLM engine
    offers: ``submit`` queues a sample, each ``step`` generates one token of every queued sample and returns those
    that finished, ``cancel`` drops samples (``cancelled`` counts them)."""

    def __init__(self, min_tokens: int = 3, max_tokens: int = 30):
        super().__init__(min_tokens, max_tokens)
        self.running: dict[str, list] = {}  # request id -> [prompt, tokens left]
        self.cancelled = 0
        self.num_steps = 0

    async def complete(self, prompt: Prompt, request_id: str) -> Completion:  # pragma: no cover - not this interface
        raise AssertionError("a stepped engine is driven through submit/step/cancel")

    def submit(self, prompt: Prompt, request_id: str) -> None:
        assert request_id not in self.running, request_id
        self.request_ids.append(request_id)
        self.started[prompt.prompt_id] += 1
        length = self.min_tokens + int(unit_hash("len", sample_name(request_id)) * (self.max_tokens - self.min_tokens + 1))
        self.running[request_id] = [prompt, length]

    def step(self) -> list[tuple[str, Completion]]:
        self.num_steps += 1
        done = []
        for request_id, entry in list(self.running.items()):
            prompt = entry[0]
            self.log.append(("token", prompt.prompt_id))
            self.tokens[prompt.prompt_id] += 1
            entry[1] -= 1
            if entry[1] == 0:
                del self.running[request_id]
                self.finished[prompt.prompt_id] += 1
                done.append((request_id, Completion(prompt.prompt_id, f"{label_for(prompt, request_id)}|{request_id}")))
        return done

    def cancel(self, request_ids) -> None:
        for request_id in request_ids:
            if self.running.pop(request_id, None) is not None:
                self.cancelled += 1


class FakeOpenAIServer:
    """A small OpenAI-compatible ``/v1/completions`` server on 127.0.0.1 with injectable failures.

    ``plan(arrival_index, request_id, attempt)`` returns the action for each request: ``"ok"``, ``"500"``, ``"429"``,
    ``"400"``, ``"drop"`` (close the connection without answering), ``"timeout"`` (answer after ``slow_s``) or
    ``"garbage"`` (200 with a body that is not JSON) or ``"hold"`` (never answer: wait until the server stops; the
    attempt is counted in ``held`` first, so a test's clock can time it out by that event, not by wall-clock time);
    or an answer that does not fit the request: ``"wrong_n"`` (one choice too few, or too many for ``n=1``),
    ``"text_null"`` (the first choice's text is ``null``), ``"logprob_mismatch"`` (one log-prob fewer than token
    ids), ``"no_token_ids"`` (text only, as a server without ``return_token_ids``); or ``"<status>:<text>"`` (that
    status with that body). ``GET /health`` answers 200, or never when ``health="hold"`` (a hung server).
    ``token_ids=False``: completions with log-probs but without token ids (a server that ignores
    ``return_token_ids``).
    The completion text is ``"<label>|<sample name>"``: the request id for ``n=1``, ``"<request id>#<k>"`` for the
    ``k``-th choice of an ``n``-request. A request asking for log-probs (``logprobs``) gets token ids (the text's
    code points) and made-up log-probs (``-1/(position+1)``).
    """

    def __init__(self, plan: Callable[[int, str, int], str] = lambda i, rid, a: "ok", slow_s: float = 0.5,
                 pass_rates: dict[str, float] | None = None, health: str = "ok", token_ids: bool = True):
        self.plan = plan
        self.health = health
        self.token_ids = token_ids
        self.health_checks = 0
        self.slow_s = slow_s
        self.pass_rates = pass_rates or {}
        self.lock = threading.Lock()
        self.arrivals = 0
        self.attempts: Counter = Counter()
        self.actions: list[tuple[str, str]] = []
        self.served: Counter = Counter()
        self.bodies: dict[str, dict] = {}
        self.held: Counter = Counter()
        self.release = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep test output quiet
                pass

            def do_GET(self):
                with server.lock:
                    server.health_checks += 1
                if server.health == "hold" and self.path == "/health":
                    server.release.wait(30)
                self._send(200 if self.path == "/health" else 404, b"{}")

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                raw = self.rfile.read(length) if length else b""
                if not raw or len(raw) < length:  # the client went away mid-request (e.g. cancelled): nothing arrived
                    self.close_connection = True
                    return
                body = json.loads(raw)
                request_id = self.headers.get("X-Request-Id", "")
                with server.lock:
                    index = server.arrivals
                    server.arrivals += 1
                    server.attempts[request_id] += 1
                    attempt = server.attempts[request_id]
                    server.bodies[request_id] = body
                action = server.plan(index, request_id, attempt)
                with server.lock:
                    server.actions.append((request_id, action))
                if action == "drop":
                    self.close_connection = True
                    return
                if action.isdigit():
                    self._send(int(action), b'{"error": "injected"}')
                    return
                if action[:3].isdigit() and action[3:4] == ":":
                    self._send(int(action[:3]), action[4:].encode())
                    return
                if action == "garbage":
                    self._send(200, b"{not json")
                    return
                if action == "timeout":
                    time.sleep(server.slow_s)
                if action == "hold":
                    with server.lock:
                        server.held[request_id] += 1
                    server.release.wait(30)
                prompt = body.get("prompt")  # text, or token ids
                rate = server.pass_rates.get(prompt, 0.5) if isinstance(prompt, str) else 0.5
                n = body.get("n", 1)
                names = [request_id] if n == 1 else [f"{request_id}#{k}" for k in range(n)]
                choices = []
                for k, name in enumerate(names):
                    label = "1" if unit_hash("label", sample_name(name)) < rate else "0"
                    choice = {"index": k, "text": f"{label}|{name}", "finish_reason": "stop"}
                    if body.get("logprobs") is not None:
                        if server.token_ids:
                            choice["token_ids"] = [ord(c) for c in choice["text"]]
                        choice["logprobs"] = {"tokens": list(choice["text"]),
                                              "token_logprobs": [-1 / (i + 1) for i in range(len(choice["text"]))]}
                    choices.append(choice)
                if action == "wrong_n":  # an answer that does not fit the request, however often it is asked
                    choices = choices[:-1] if len(choices) > 1 else choices * 2
                elif action == "text_null":
                    choices[0]["text"] = None
                elif action == "logprob_mismatch" and "logprobs" in choices[0]:
                    choices[0]["logprobs"]["token_logprobs"].pop()
                elif action == "no_token_ids":
                    for choice in choices:
                        choice.pop("token_ids", None)
                        choice.pop("logprobs", None)
                choices.reverse()  # the client must order choices by index, not by position
                payload = {"id": request_id, "object": "text_completion", "model": body.get("model"),
                           "choices": choices}
                try:
                    self._send(200, json.dumps(payload).encode())
                    with server.lock:
                        server.served[request_id] += 1
                except OSError:  # the client gave up (timeout) and closed the connection
                    pass

            def _send(self, status: int, data: bytes):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        class QuietServer(ThreadingHTTPServer):
            # socketserver's default listen backlog is 5. The tests open 16+ connections at once; with a backlog of 5
            # Linux answers the surplus SYNs with SYN cookies and, while the single accept thread is behind, drops
            # their handshake ACK and the request headers, then resets the connection when the request body arrives
            # (the cookie check fails on that segment: TcpExtSyncookiesFailed). The client sees ReadError for a
            # request the server never counted, which wastes one of its attempts. Real servers listen with a large
            # backlog (uvicorn, behind vLLM and SGLang: 2048), so this one does too (capped by net.core.somaxconn).
            request_queue_size = 2048

            def handle_error(self, request, client_address):  # a client that gave up (timeout) resets the socket
                pass

        self.httpd = QuietServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> "FakeOpenAIServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)
