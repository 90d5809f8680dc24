#!/usr/bin/env python3
"""A stand-in for llama-server b11434, for the tests of ``bench`` and of the process handling that need no binary.

It takes llama-server's arguments (``-m``, ``-md``, ``--spec-type``, ``--spec-draft-n-max``, ``--host``, ``--port``,
``--metrics``; others are ignored), logs to stdout the lines the real server logs that the tool reads, and serves
``/health``, ``/props``, ``/apply-template``, ``/completion`` and ``/metrics`` on the port. What it does is chosen
by ``FAKE_LLAMA_MODE``:

- ``ok`` (default): greedy output token i of a prompt is ``(seed + i) % 1000`` (seed: the prompt's ids summed, or its
  length); with a draft, every verification step drafts ``n_max`` tokens (fewer at the end) and accepts
  ``FAKE_ACCEPT`` of them (default 2): the ``accepted a/n draft tokens`` line per step (``LLAMA_TRACE``), the
  ``timings`` and the ``/metrics`` counters agree;
- ``exit``: logs a loader error and exits 1 at once; ``refuse-draft``: the same, only when a draft is given;
- ``nolisten``: logs a line and sleeps, never listening;
- ``mismatch``: with a draft, the output's token 3 differs;
- ``slow``: each ``/completion`` takes ``FAKE_SLOW`` seconds (default 0.5).

``FAKE_LLAMA_PIDFILE``: each start appends its pid (the tests check that every one is gone). A port already
taken ends the process as llama-server does (``couldn't bind HTTP server socket``, exit 1).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def arg(argv: list[str], name: str, default: str | None = None) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else default


def main(argv: list[str]) -> int:
    if "--version" in argv:
        print("version: 9999 (fake)\nbuilt with a test", file=sys.stderr)
        return 0
    mode = os.environ.get("FAKE_LLAMA_MODE", "ok")
    if os.environ.get("FAKE_LLAMA_PIDFILE"):
        with open(os.environ["FAKE_LLAMA_PIDFILE"], "a") as f:
            f.write(f"{os.getpid()}\n")
    model, draft = arg(argv, "-m"), arg(argv, "-md")
    host, port = arg(argv, "--host", "127.0.0.1"), int(arg(argv, "--port", "8080") or 8080)
    n_max = int(arg(argv, "--spec-draft-n-max", "4") or 4)
    accept = int(os.environ.get("FAKE_ACCEPT", "2"))
    print(f"main: loading model {model}", flush=True)
    if mode == "exit" or (mode == "refuse-draft" and draft):
        print(f"llama_model_load: error loading model: fake refusal of {draft if draft else model}", flush=True)
        print(f"common_init_from_params: failed to load model '{draft if draft else model}'", flush=True)
        print("srv    load_model: exiting due to model loading error", flush=True)
        return 1
    if mode == "nolisten":
        time.sleep(3600)
        return 0
    counts: dict[str, Any] = {"steps": 0, "drafted": 0, "accepted": 0, "predicted": 0, "per_pos": [0] * n_max}
    lock = threading.Lock()
    task = [0]

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a: Any) -> None:
            pass

        def send(self, code: int, body: Any, ctype: str = "application/json") -> None:
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802
            if self.path == "/health":
                self.send(200, {"status": "ok"})
            elif self.path == "/props":
                self.send(200, {"model_path": model, "chat_template": os.environ.get("FAKE_TEMPLATE", ""),
                                "build_info": "b9999-fake"})
            elif self.path == "/metrics":
                with lock:
                    lines = [f"llamacpp:tokens_predicted_total {counts['predicted']}",
                             f"llamacpp:spec_decode_num_draft_tokens_total {counts['drafted']}",
                             f"llamacpp:spec_decode_num_accepted_tokens_total {counts['accepted']}",
                             f"llamacpp:spec_decode_num_drafts_total {counts['steps']}"]
                    if draft:
                        lines += [f'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{{position="{k}"}} {v}'
                                  for k, v in enumerate(counts["per_pos"])]
                self.send(200, "\n".join(lines) + "\n", "text/plain")
            else:
                self.send(404, {"error": "not found"})

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            if self.path == "/apply-template":
                self.send(200, {"prompt": "<user>" + body["messages"][0]["content"] + "</user>"})
                return
            if self.path != "/completion":
                self.send(404, {"error": "not found"})
                return
            if mode == "slow":
                time.sleep(float(os.environ.get("FAKE_SLOW", "0.5")))
            prompt, n = body["prompt"], int(body["n_predict"])
            seed = sum(prompt) if isinstance(prompt, list) else len(prompt)
            tokens = [(seed + i) % 1000 for i in range(n)]
            drafted = accepted = 0
            with lock:
                task[0] += 1
                if draft:
                    if mode == "mismatch" and n > 3:
                        tokens[3] += 1
                    gen = 1
                    while gen < n:
                        d = min(n_max, n - gen - 1)
                        if d <= 0:
                            gen += 1
                            continue
                        a = min(accept, d)
                        print(f"slot update_slots: id  0 | task {task[0]} | accepted {a:2d}/{d:2d} draft tokens",
                              flush=True)
                        counts["steps"] += 1
                        counts["drafted"] += d
                        counts["accepted"] += a
                        for k in range(a):
                            counts["per_pos"][k] += 1
                        drafted, accepted, gen = drafted + d, accepted + a, gen + a + 1
                counts["predicted"] += n
            ms = n * (4.0 if draft else 10.0)
            self.send(200, {"tokens": tokens, "timings": {"predicted_n": n, "predicted_ms": ms, "prompt_ms": 1.0,
                                                          "draft_n": drafted, "draft_n_accepted": accepted}})

    try:
        srv = ThreadingHTTPServer((host, port), Handler)
    except OSError:
        print(f"srv    operator(): couldn't bind HTTP server socket, hostname: {host}, port: {port}", flush=True)
        return 1
    srv.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    print(f"main: server is listening on http://{host}:{port}", flush=True)
    srv.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
