"""A small OpenAI-compatible server for a local transformers model (stdlib http.server, no extra deps).

    python -m kernelgym.agents.serve --model smollm2 --port 8000       # or --model PATH_OR_HUB_NAME
    kernelgym bench --policy openai:smollm2@http://127.0.0.1:8000/v1 ...

Serves POST /v1/chat/completions (messages, max_tokens / max_completion_tokens, temperature, top_p, seed,
n, stream, stop), GET /v1/models and GET /health. A model's generation also ends at its reply's first
closed ```python block (SamplingConfig.stop_at_code_end). Requests are handled on threads; generation is
serialized by the model's lock. Meant for tests, demos and a single user on one machine, not as a production
server: it listens on 127.0.0.1 unless told otherwise, and with --api-key-env requires that key as a Bearer
token.
`fail_first=N` answers the first N completions with 503, to exercise clients' retries.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_BODY = 16 * 1024 * 1024


class ChatServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, model: Any, *, model_name: str = "local", host: str = "127.0.0.1", port: int = 0,
                 api_key: str | None = None, fail_first: int = 0, max_tokens_limit: int = 4096):
        super().__init__((host, port), _Handler)
        self.model = model  # an HFPolicy (has .generate) or any Policy (answered through act)
        self.model_name = model_name
        self.api_key = api_key
        self.fail_first = fail_first
        self.max_tokens_limit = max_tokens_limit
        self.completions = 0  # requests answered, failures included
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> ChatServer:
        """Serve on a daemon thread; returns self (use as a context manager to stop it)."""
        self._thread = threading.Thread(target=self.serve_forever, name="kernelgym-serve", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ChatServer:  # noqa: PYI034 - Python 3.10 has no typing.Self
        return self if self._thread else self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # the work -----------------------------------------------------------------------------------------------

    def complete(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.completions += 1
            failing = self.completions <= self.fail_first
        if failing:
            return 503, _error("server_busy", "the server is warming up (fail_first); retry")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(
                isinstance(m, dict) and isinstance(m.get("content", ""), str) and m.get("role")
                for m in messages):
            return 400, _error("invalid_request_error",
                               "messages must be a non-empty list of {role, content}")
        if body.get("stream") and int(body.get("n") or 1) != 1:
            return 400, _error("invalid_request_error", "stream=true supports n=1 only")
        n = int(body.get("n") or 1)
        if not 1 <= n <= 8:
            return 400, _error("invalid_request_error", "n must be between 1 and 8")
        conversation = [{"role": m["role"], "content": m.get("content") or ""} for m in messages]
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
        generations = self._generate([conversation] * n, body, max_tokens)
        created = int(time.time())
        choices = [{"index": i, "message": {"role": "assistant", "content": g["text"]}, "logprobs": None,
                    "finish_reason": g["finish_reason"]} for i, g in enumerate(generations)]
        prompt_tokens = generations[0]["prompt_tokens"] if generations else 0
        completion_tokens = sum(g["completion_tokens"] for g in generations)
        return 200, {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": created,
            "model": body.get("model") or self.model_name, "choices": choices,
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }

    def _generate(self, conversations, body, max_tokens) -> list[dict[str, Any]]:
        model = self.model
        stop = body.get("stop") or ()
        stop = (stop,) if isinstance(stop, str) else tuple(str(s) for s in stop)
        if hasattr(model, "generate") and hasattr(model, "sampling"):
            changes: dict[str, Any] = {"stop": stop}
            if max_tokens:
                changes["max_new_tokens"] = min(int(max_tokens), self.max_tokens_limit)
            for key in ("temperature", "top_p", "seed"):
                if body.get(key) is not None:
                    changes[key] = body[key]
            sampling = model.sampling.replace(**changes)
            return [vars(g) for g in model.generate(conversations, sampling)]
        texts = [str(model.act({"messages": c}, {})) for c in conversations]
        cut = [min([t.index(s) for s in stop if s and s in t], default=len(t)) for t in texts]
        return [{"text": t[:c], "prompt_tokens": 0, "completion_tokens": 0,
                 "finish_reason": "stop"} for t, c in zip(texts, cut, strict=True)]


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


class _Handler(BaseHTTPRequestHandler):
    server: ChatServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet by default
        if os.environ.get("KERNELGYM_SERVE_LOG"):
            super().log_message(format, *args)

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorized(self) -> bool:
        key = self.server.api_key
        if not key or self.headers.get("Authorization", "") == f"Bearer {key}":
            return True
        self._send(401, _error("invalid_api_key", "missing or wrong API key"))
        return False

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        if path in ("/health", "/v1/health"):
            self._send(200, {"status": "ok"})
        elif path == "/v1/models":
            if self._authorized():
                self._send(200, {"object": "list", "data": [
                    {"id": self.server.model_name, "object": "model", "created": 0,
                     "owned_by": "kernelgym"}]})
        else:
            self._send(404, _error("not_found", f"no route {self.path}"))

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        if path != "/v1/chat/completions":
            self._send(404, _error("not_found", f"no route {self.path}"))
            return
        if not self._authorized():
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length <= 0 or length > MAX_BODY:
            self._send(400 if length <= 0 else 413, _error("invalid_request_error", "bad Content-Length"))
            return
        try:
            body = json.loads(self.rfile.read(length))
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")  # noqa: TRY004 - reported as bad JSON
        except ValueError as exc:
            self._send(400, _error("invalid_request_error", f"bad JSON: {exc}"))
            return
        try:
            status, payload = self.server.complete(body)
        except Exception as exc:  # noqa: BLE001 - the model failed: an answer, not a dropped connection
            status, payload = 500, _error("server_error", f"{type(exc).__name__}: {exc}")
        if status == 200 and body.get("stream"):
            self._stream(payload)
        else:
            self._send(status, payload)

    def _stream(self, payload: dict[str, Any]) -> None:
        """Server-sent events: the whole completion as one chunk, then the finish chunk and [DONE]."""
        choice = payload["choices"][0]
        base = {"id": payload["id"], "object": "chat.completion.chunk", "created": payload["created"],
                "model": payload["model"]}
        events = [
            {**base, "choices": [{"index": 0,
                                  "delta": {"role": "assistant", "content": choice["message"]["content"]},
                                  "finish_reason": None}]},
            {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]},
        ]
        data = b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events) + b"data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def load_model(spec: str, **sampling: Any):
    """`smollm2`, `tiny:FOLDER` (built there if missing), or a transformers path / hub name."""
    from kernelgym.agents.policies.hf import HFPolicy, SamplingConfig, smollm2_policy

    if spec == "smollm2":
        policy = smollm2_policy()
        if sampling:
            policy.sampling = policy.sampling.replace(**sampling)
        return policy
    if spec.startswith("tiny:"):
        from kernelgym.agents.tiny import make_tiny_model

        folder = spec[5:]
        if not os.path.isfile(os.path.join(folder, "config.json")):
            make_tiny_model(folder)
        spec = folder
    return HFPolicy(spec, sampling=SamplingConfig().replace(**sampling))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m kernelgym.agents.serve",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2",
                        help="smollm2, tiny:FOLDER, or a transformers path/name")
    parser.add_argument("--name", default=None, help="the model id clients send (default: the --model value)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--api-key-env", default=None, help="require the key in this environment variable")
    parser.add_argument("--max-new-tokens", type=int, default=None, help="default completion length")
    args = parser.parse_args(argv)
    api_key = os.environ.get(args.api_key_env) if args.api_key_env else None
    if args.api_key_env and not api_key:
        parser.error(f"${args.api_key_env} is not set")
    sampling = {"max_new_tokens": args.max_new_tokens} if args.max_new_tokens else {}
    model = load_model(args.model, **sampling)
    server = ChatServer(model, model_name=args.name or args.model, host=args.host, port=args.port,
                        api_key=api_key)
    print(f"serving {args.model} at {server.url} (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
