"""A stand-in for OpenAI's chat completions as n8n's AI Agent uses them, for tests only.

The agent sends ``POST /v1/chat/completions`` with ``stream: true`` and its tools' JSON schemas
in ``tools``. This server plays a model that always looks things up first: while the
conversation has no tool result, it answers with a streamed call of the first tool, its
``query`` argument the user's last message; once a tool result is there, it streams a reply
built from it (the status and the context's first ``[SOURCE n]`` block). Non-streamed requests
get the same answers as one JSON body.
"""

from __future__ import annotations

import json
import re
import threading
import time

from werkzeug.wrappers import Request, Response

from tests.loopback import LoopbackServer


class ChatAgentStandin(LoopbackServer):
    def __init__(self, api_key: str = "sk-chat-standin"):
        super().__init__()
        self.api_key = api_key
        self.requests: list[dict] = []
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def handle(self, request: Request) -> Response:
        if request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return _error(401, "Incorrect API key provided.")
        if request.path.endswith("/models"):
            return Response(json.dumps({"object": "list", "data": [{"id": "gpt-4o", "object": "model"}]}),
                            mimetype="application/json")
        if not request.path.endswith("/chat/completions"):
            return _error(404, f"Unknown path {request.path}")
        try:
            body = json.loads(request.get_data() or b"{}")
        except ValueError:
            return _error(400, "We could not parse the JSON body of your request.")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return _error(400, "messages must be a non-empty list")
        with self._lock:
            self.requests.append(body)
        tool_results = [m for m in messages if m.get("role") == "tool"]
        tools = body.get("tools") or []
        if not tool_results and tools:
            question = next((_text(m) for m in reversed(messages) if m.get("role") == "user"), "")
            name = tools[0]["function"]["name"]
            call = {"id": f"call_{len(self.requests)}", "type": "function",
                    "function": {"name": name, "arguments": json.dumps({"query": question})}}
            return self._reply(body, tool_call=call)
        return self._reply(body, content=_answer_from(_text(tool_results[-1]) if tool_results else ""))

    def _reply(self, body: dict, *, content: str | None = None, tool_call: dict | None = None) -> Response:
        model = body.get("model", "gpt-4o")
        created = int(time.time())
        finish = "tool_calls" if tool_call else "stop"
        if not body.get("stream"):
            message: dict = {"role": "assistant", "content": content}
            if tool_call:
                message["tool_calls"] = [tool_call]
            return Response(json.dumps({
                "id": "chatcmpl-standin", "object": "chat.completion", "created": created, "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}}),
                mimetype="application/json")

        def chunk(delta: dict, reason: str | None = None) -> str:
            return "data: " + json.dumps({"id": "chatcmpl-standin", "object": "chat.completion.chunk",
                                          "created": created, "model": model,
                                          "choices": [{"index": 0, "delta": delta, "finish_reason": reason}]}) + "\n\n"

        def events():
            if tool_call:
                yield chunk({"role": "assistant", "content": None, "tool_calls": [
                    {"index": 0, "id": tool_call["id"], "type": "function",
                     "function": {"name": tool_call["function"]["name"], "arguments": ""}}]})
                arguments = tool_call["function"]["arguments"]
                for start in range(0, len(arguments), 16):
                    yield chunk({"tool_calls": [{"index": 0, "function": {"arguments": arguments[start:start + 16]}}]})
            else:
                yield chunk({"role": "assistant", "content": ""})
                for start in range(0, len(content or ""), 40):
                    yield chunk({"content": content[start:start + 40]})
            yield chunk({}, finish)
            if (body.get("stream_options") or {}).get("include_usage"):
                yield "data: " + json.dumps({"id": "chatcmpl-standin", "object": "chat.completion.chunk",
                                             "created": created, "model": model, "choices": [],
                                             "usage": {"prompt_tokens": 10, "completion_tokens": 10,
                                                       "total_tokens": 20}}) + "\n\n"
            yield "data: [DONE]\n\n"

        return Response(events(), mimetype="text/event-stream")


def _text(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):  # content parts
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def _answer_from(tool_output: str) -> str:
    """A reply grounded in the tool's answer: its status and its first source block."""
    try:
        data = json.loads(tool_output)
    except ValueError:
        data = {"context": tool_output}
    if isinstance(data, list) and data and isinstance(data[0], dict) and data[0].get("type") == "text":
        # An MCP tool's content blocks (n8n 1.x hands those over; 2.x its structured content):
        # "status: ..." and "message: ..." lines, then the [SOURCE n] context.
        text = "\n".join(str(block.get("text", "")) for block in data if isinstance(block, dict))
        status = re.search(r"^status: (\w+)", text, re.MULTILINE)
        context = re.search(r"^\[(?:DOCUMENT|SOURCE 1)\]", text, re.MULTILINE)  # the context's first line
        data = {"status": status.group(1) if status else "unknown", "context": text[context.start() if context else 0:]}
    if isinstance(data, list) and data:
        data = data[0]
    if not isinstance(data, dict):
        data = {"context": str(data)}
    context = str(data.get("context") or "")
    first = context.split("[SOURCE 2]")[0].strip()
    return f"Status: {data.get('status', 'unknown')}. From the documents: {first}"


def _error(status: int, message: str) -> Response:
    return Response(json.dumps({"error": {"message": message, "type": "invalid_request_error"}}), status=status,
                    mimetype="application/json")
