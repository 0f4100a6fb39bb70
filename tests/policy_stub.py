"""A local vLLM-shaped policy server backed by a Hugging Face model on CPU (stdlib HTTP, runs in a thread).

What TRL's asynchronous trainer and ``tau2-gym rollout --capture-tokens vllm`` read from vLLM, computed for real by
the model: ``/v1/chat/completions`` renders the messages and tools with the tokenizer's chat template and answers
with vLLM's token fields (``prompt_token_ids`` at the top level, ``choices[0].token_ids``, logprobs whose tokens are
spelled ``token_id:N``); ``/v1/completions`` takes a prompt of token ids (``return_token_ids``, ``logprobs``: what
TRL's async rollout loop sends); ``/v1/models`` and ``/health``. The content of a chat reply is the decoded text (vLLM
without ``--tool-call-parser``: tool-call markup stays in the text).

A reply is sampled from the model (``seed`` in the request seeds it), unless ``script(prompt_text)`` returns a text:
then that text (and EOS) is the reply. Either way its logprobs are the model's own log-softmax of the reply's tokens
after the prompt, at temperature 1 -- what the trainer's forward computes for the same weights. The trainer's weight
sync reaches the model through :class:`WeightSync` (``AsyncGRPOTrainer(weight_transfer=...)``), so the served
policy is the trained one. ``server.requests`` counts answered requests per path.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator, Optional

import torch

from tau2_gym.training.hf.chat import template_messages

Script = Callable[[str], Optional[str]]


class PolicyServer:
    def __init__(self, model: Any, tokenizer: Any, *, name: str = "tiny", script: Optional[Script] = None) -> None:
        self.model = model.eval()
        self.tok = tokenizer
        self.name = name
        self.script = script
        self.requests: Counter = Counter()
        self.versions = 0  # weight syncs received
        self.lock = threading.Lock()  # one forward at a time; weight sync waits for it
        self._server: Optional[ThreadingHTTPServer] = None

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    # ------------------------------------------------------------------ the model

    def reply_ids(self, prompt_ids: list[int], max_tokens: int, seed: Optional[int]) -> tuple[list[int], list[float]]:
        """The reply's token ids (scripted or sampled, ending with EOS unless cut at ``max_tokens``) and their
        logprobs under the current weights."""
        eos = self.tok.eos_token_id
        text = self.script(self.tok.decode(prompt_ids)) if self.script is not None else None
        with self.lock, torch.no_grad():
            if text is not None:
                ids = self.tok.encode(text, add_special_tokens=False)[: max(0, max_tokens - 1)] + [eos]
            else:
                with torch.random.fork_rng(devices=[]):
                    torch.manual_seed(int(seed if seed is not None else time.time_ns()) & 0x7FFFFFFF)
                    out = self.model.generate(
                        torch.tensor([prompt_ids]),
                        attention_mask=torch.ones(1, len(prompt_ids), dtype=torch.long),
                        do_sample=True,
                        temperature=1.0,
                        top_k=0,
                        top_p=1.0,
                        max_new_tokens=max_tokens,
                        eos_token_id=eos,
                        pad_token_id=self.tok.pad_token_id,
                    )
                ids = out[0, len(prompt_ids) :].tolist()
            full = torch.tensor([prompt_ids + ids])
            logits = self.model(input_ids=full).logits[0, len(prompt_ids) - 1 : -1].float()
            logps = torch.log_softmax(logits, -1).gather(1, torch.tensor(ids)[:, None])[:, 0]
        return ids, [float(x) for x in logps]

    def load_weights(self, named: Iterator[tuple[str, torch.Tensor]]) -> int:
        """Copy streamed ``(name, tensor)`` pairs into the served model; returns how many were copied."""
        n = 0
        with self.lock, torch.no_grad():
            params = dict(self.model.named_parameters())
            for name, tensor in named:
                params[name].copy_(tensor.detach().to(params[name].dtype))
                n += 1
            self.versions += 1
        return n

    # ------------------------------------------------------------------ the endpoints

    def _chat(self, body: dict) -> dict:
        kwargs = {"add_generation_prompt": True, "tokenize": False}
        if body.get("tools"):
            kwargs["tools"] = body["tools"]
        text = self.tok.apply_chat_template(template_messages(body["messages"]), **kwargs)
        prompt_ids = self.tok.encode(text, add_special_tokens=False)
        ids, logps = self.reply_ids(prompt_ids, int(body.get("max_tokens") or 64), body.get("seed"))
        eos = self.tok.eos_token_id
        content = self.tok.decode([i for i in ids if i != eos])
        entries = [
            {"token": f"token_id:{i}", "logprob": lp, "bytes": None, "top_logprobs": []} for i, lp in zip(ids, logps)
        ]
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": content, "tool_calls": []},
            "finish_reason": "stop" if ids[-1] == eos else "length",
            "stop_reason": None,
            "token_ids": ids,
        }
        if body.get("logprobs"):
            choice["logprobs"] = {"content": entries}
        return {
            "id": f"chatcmpl-{time.time_ns()}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.name,
            "prompt_token_ids": prompt_ids,
            "choices": [choice],
            "usage": {"prompt_tokens": len(prompt_ids), "completion_tokens": len(ids), "total_tokens": 0},
        }

    def _completion(self, body: dict) -> dict:
        prompt_ids = [int(i) for i in body["prompt"]]
        ids, logps = self.reply_ids(prompt_ids, int(body.get("max_tokens") or 16), body.get("seed"))
        return {
            "id": f"cmpl-{time.time_ns()}",
            "object": "text_completion",
            "model": self.name,
            "choices": [
                {
                    "index": 0,
                    "text": self.tok.decode(ids),
                    "token_ids": ids,
                    "logprobs": {"token_logprobs": logps, "tokens": [f"token_id:{i}" for i in ids]},
                    "finish_reason": "stop" if ids[-1] == self.tok.eos_token_id else "length",
                }
            ],
        }

    def __enter__(self) -> PolicyServer:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                path = self.path.rstrip("/")
                if path == "/health":
                    self._send(200, {"status": "ok"})
                elif path == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": stub.name, "max_model_len": 16384}]})
                else:
                    self._send(404, {"error": {"message": "Not Found"}})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                path = self.path.rstrip("/")
                handler = {"/v1/chat/completions": stub._chat, "/v1/completions": stub._completion}.get(path)
                if handler is None:
                    self._send(404, {"error": {"message": "Not Found"}})
                    return
                try:
                    out = handler(body)
                except Exception as exc:  # noqa: BLE001 - a bad request is the client's 400, as vLLM answers
                    self._send(400, {"error": {"message": f"{type(exc).__name__}: {exc}"}})
                    return
                stub.requests[path] += 1
                self._send(200, out)

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:
                # a client that gave up (the worker stopping mid-request) closes first: not worth a traceback
                if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
                    super().handle_error(request, client_address)

        self._server = Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


class WeightSync:
    """``AsyncGRPOTrainer``'s ``weight_transfer`` for a :class:`PolicyServer`: the trainer's weights are copied into
    the served model after each step (as the trainer streams them into vLLM)."""

    def __init__(self, server: PolicyServer) -> None:
        self.server = server
        self.sent: list[int] = []  # tensors per sync

    def init_weight_transfer(self) -> None:
        pass

    def pause(self) -> None:
        pass

    def send_weights(self, iterator: Iterator[tuple[str, torch.Tensor]]) -> None:
        self.sent.append(self.server.load_weights(iterator))

    def resume(self) -> None:
        pass

    def destroy(self) -> None:
        pass


class _TorchVarlen:
    """``flash_attn_varlen_func`` in plain torch (causal, bottom-right aligned as flash-attn's), for CPU."""

    @staticmethod
    def flash_attn_varlen_func(q, k, v, cu_q, cu_k, max_q, max_k, softmax_scale=None, causal=True, **kwargs):
        out = torch.empty_like(q)
        heads, kv_heads = q.shape[1], k.shape[1]
        for i in range(len(cu_q) - 1):
            a, b, c, d = int(cu_q[i]), int(cu_q[i + 1]), int(cu_k[i]), int(cu_k[i + 1])
            qi, ki, vi = q[a:b].transpose(0, 1), k[c:d].transpose(0, 1), v[c:d].transpose(0, 1)
            if kv_heads != heads:
                ki, vi = ki.repeat_interleave(heads // kv_heads, 0), vi.repeat_interleave(heads // kv_heads, 0)
            mask = torch.ones(b - a, d - c, dtype=torch.bool).tril(d - c - (b - a))
            attn = torch.nn.functional.scaled_dot_product_attention(qi, ki, vi, attn_mask=mask, scale=softmax_scale)
            out[a:b] = attn.transpose(0, 1)
        return out


def cpu_async_grpo(monkeypatch: Any) -> None:
    """Let TRL's ``AsyncGRPOTrainer`` run on CPU: its two CUDA-only pieces are replaced -- the flash-attention-3
    kernel of its tree attention (fetched from the Hub, CUDA only) by the same varlen attention in plain torch, and
    the GPU peak-FLOPs lookup (used only for its MFU metric) by None. The rest of the trainer runs as shipped."""
    import trl.experimental.async_grpo.async_grpo_trainer as trainer_module
    import trl.experimental.async_grpo.packing as packing

    monkeypatch.setattr(packing, "_flash_attn", lambda: _TorchVarlen)
    monkeypatch.setattr(trainer_module, "get_peak_flops_per_device", lambda *args: None)
