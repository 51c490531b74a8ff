"""A local stand-in of the Files and Batches endpoints, beside the scripted chat completions.

`ScriptedBatches` is a `ScriptedLLM` that also answers, on 127.0.0.1, what the real `openai`
client sends for the Batch API:
- `POST /v1/files` (multipart, `purpose=batch`), `GET /v1/files/{id}/content`;
- `POST /v1/batches`, `GET /v1/batches` (newest first, `limit` and `after`),
  `GET /v1/batches/{id}`, `POST /v1/batches/{id}/cancel`.

A batch moves one status per look (`GET`): validating -> in_progress -> completed, or failed at
validation (`Plan.fail_validation`), or expired after answering only its first
`Plan.expire_after` lines (the others go to the error file as `batch_expired`), as a real batch
does. `hold()` keeps batches in_progress until `release()`, so a test can kill a client while
its batch runs; `hold_creates()` makes each batch asked for but keeps the answer to its
`POST` back until `release()` (a client killed, or timed out, before it learns the batch id).
Each input line is answered by the same responder as a live call (a reply with
an error status goes to the error file, a partial failure); every line answered is counted as
one paid call in `lines_answered`. Every request is logged in `log` ("POST /v1/batches"...).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any
from urllib.parse import parse_qs, urlsplit

from cuqa_builder.testing.loopback import QuietHandler
from cuqa_builder.testing.openai_server import (
    JSON,
    Reply,
    Responder,
    ScriptedLLM,
    _completion,
)


@dataclass
class Plan:
    """How the next batches end (tests set it before the client creates them)."""

    fail_validation: str | None = None  # an error message: the batch fails at validation
    expire_after: int | None = None  # answer this many lines, then expire


@dataclass
class _Batch:
    id: str
    input_file_id: str
    lines: list[dict[str, Any]]
    plan: Plan
    status: str = "validating"
    output_file_id: str | None = None
    error_file_id: str | None = None
    completed: int = 0
    failed: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)
    created_at: int = field(default_factory=lambda: int(time.time()))

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id, "object": "batch", "endpoint": "/v1/chat/completions",
            "errors": {"object": "list", "data": self.errors} if self.errors else None,
            "input_file_id": self.input_file_id, "completion_window": "24h",
            "status": self.status, "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id, "created_at": self.created_at,
            "request_counts": {"total": len(self.lines), "completed": self.completed,
                               "failed": self.failed},
            "metadata": None,
        }


def _multipart(content_type: str, body: bytes) -> dict[str, tuple[str | None, bytes]]:
    """Form fields of a multipart body: name -> (filename, content)."""
    message = BytesParser(policy=HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + body
    )
    fields = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        fields[str(name)] = (part.get_filename(), part.get_payload(decode=True) or b"")
    return fields


class ScriptedBatches(ScriptedLLM):
    def __init__(self, responder: Responder | None = None) -> None:
        self.files: dict[str, tuple[str, bytes]] = {}  # id -> (filename, content)
        self.batches: dict[str, _Batch] = {}
        self.plan = Plan()
        self.log: list[str] = []
        self.lines_answered = 0
        self._running = threading.Event()
        self._running.set()
        self._answering_creates = threading.Event()
        self._answering_creates.set()
        self._created: dict[str, float] = {}  # file id -> when it was uploaded
        super().__init__(responder)

    def hold(self) -> None:
        """Keep every batch in_progress (a long batch) until `release()`."""
        self._running.clear()

    def hold_creates(self) -> None:
        """Make each batch asked for, but answer its `POST` only after `release()`."""
        self._answering_creates.clear()

    def release(self) -> None:
        self._running.set()
        self._answering_creates.set()

    def uploaded_ids(self) -> list[str]:
        """Every custom_id of every batch input file uploaded, in order (repeats included)."""
        return [json.loads(line)["custom_id"] for name, data in self.files.values()
                if name != "output" for line in data.decode().splitlines() if line.strip()]

    def _new_file(self, name: str, data: bytes) -> str:
        file_id = f"file-{len(self.files) + 1}"
        self.files[file_id] = (name, data)
        self._created[file_id] = int(time.time())
        return file_id

    def _file_json(self, file_id: str) -> dict[str, Any]:
        name, data = self.files[file_id]
        return {"id": file_id, "object": "file", "bytes": len(data),
                "created_at": self._created[file_id],
                "filename": name, "purpose": "batch", "status": "processed"}

    def _create(self, body: dict[str, Any]) -> dict[str, Any]:
        _, data = self.files[body["input_file_id"]]
        lines = [json.loads(line) for line in data.decode().splitlines() if line.strip()]
        batch = _Batch(f"batch_{len(self.batches) + 1}", body["input_file_id"], lines,
                       Plan(**vars(self.plan)))
        self.batches[batch.id] = batch
        return batch.as_json()

    def _listing(self, query: dict[str, list[str]]) -> dict[str, Any]:
        """A page of batches, newest first (as the real endpoint lists them)."""
        newest_first = list(reversed(self.batches.values()))
        after = query.get("after", [None])[0]
        if after is not None:
            newest_first = newest_first[[b.id for b in newest_first].index(after) + 1:]
        limit = int(query.get("limit", ["20"])[0])
        page = newest_first[:limit]
        return {"object": "list", "data": [b.as_json() for b in page],
                "first_id": page[0].id if page else None,
                "last_id": page[-1].id if page else None,
                "has_more": len(newest_first) > limit}

    def _advance(self, batch: _Batch) -> None:
        """One look at a batch moves it one status on."""
        if batch.status == "validating":
            if batch.plan.fail_validation:
                batch.status = "failed"
                batch.errors = [{"code": "invalid_request", "message":
                                 batch.plan.fail_validation, "line": 1, "param": None}]
            else:
                batch.status = "in_progress"
        elif batch.status == "in_progress" and self._running.is_set():
            self._run(batch)

    def _run(self, batch: _Batch) -> None:
        answered = batch.lines
        if batch.plan.expire_after is not None:
            answered = batch.lines[: batch.plan.expire_after]
        output, errors = [], []
        for number, line in enumerate(batch.lines):
            record: dict[str, Any] = {"id": f"batch_req_{number}", "custom_id": line["custom_id"]}
            if number >= len(answered):
                errors.append(record | {"response": None, "error": {
                    "code": "batch_expired", "message": "not run within the window"}})
                continue
            reply = self._answer(line["body"])
            if reply.status == 200:
                output.append(record | {"response": {
                    "status_code": 200, "request_id": f"req_{number}",
                    "body": _completion(line["body"], reply)}, "error": None})
            else:
                errors.append(record | {"response": {
                    "status_code": reply.status, "request_id": f"req_{number}",
                    "body": {"error": {"message": reply.text or "injected", "type": "test"}}},
                    "error": None})
        batch.completed, batch.failed = len(output), len(errors)
        batch.status = "expired" if len(answered) < len(batch.lines) else "completed"
        if output:
            batch.output_file_id = self._new_file("output", _jsonl(output))
        if errors:
            batch.error_file_id = self._new_file("output", _jsonl(errors))

    def _answer(self, body: dict[str, Any]) -> Reply:
        self.lines_answered += 1  # under `lock`: the handler holds it
        return self.responder(body)

    def _handler(self) -> type[QuietHandler]:
        fake = self
        chat = super()._handler()

        class Handler(chat):  # type: ignore[misc, valid-type]
            def do_GET(self) -> None:
                fake.log.append(f"GET {self.path}")
                url = urlsplit(self.path)
                parts = url.path.rstrip("/").split("/")  # "", v1, files|batches, id, ...
                with fake.lock:
                    if parts[2:3] == ["files"] and parts[-1] == "content":
                        _, data = fake.files[parts[3]]
                        self.send_body(200, data, "application/octet-stream", {})
                    elif parts[2:3] == ["files"] and len(parts) == 4:
                        self._reply(fake._file_json(parts[3]))
                    elif parts[2:] == ["batches"]:
                        self._reply(fake._listing(parse_qs(url.query)))
                    elif parts[2:3] == ["batches"] and len(parts) == 4:
                        batch = fake.batches[parts[3]]
                        fake._advance(batch)
                        self._reply(batch.as_json())
                    else:
                        super().do_GET()

            def do_POST(self) -> None:
                if not self.path.startswith(("/v1/files", "/v1/batches")):
                    super().do_POST()
                    return
                fake.log.append(f"POST {self.path}")
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.path == "/v1/batches":
                    with fake.lock:
                        created = fake._create(json.loads(body))
                    fake._answering_creates.wait()  # the batch exists whether or not we answer
                    self._reply(created)
                    return
                with fake.lock:
                    if self.path == "/v1/files":
                        fields = _multipart(self.headers["Content-Type"], body)
                        name, data = fields["file"]
                        self._reply(fake._file_json(fake._new_file(name or "input", data)))
                    elif self.path.endswith("/cancel"):
                        batch = fake.batches[self.path.split("/")[3]]
                        batch.status = "cancelled"
                        self._reply(batch.as_json())
                    else:
                        self._reply({"error": {"message": "not found"}}, 404)

            def _reply(self, payload: Any, status: int = 200) -> None:
                self.send_body(status, json.dumps(payload).encode(), JSON, {})

        return Handler


def _jsonl(records: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def answer_batch_file(
    input_lines: list[str], responder: Callable[[dict[str, Any]], Reply]
) -> list[str]:
    """What an offline engine writes for a batch input file: one output line per input line
    (vLLM's run_batch format; a failed request keeps its status code and no body)."""
    output = []
    for number, text in enumerate(input_lines):
        line = json.loads(text)
        reply = responder(line["body"])
        ok = reply.status == 200
        output.append(json.dumps({
            "id": f"vllm-{number}", "custom_id": line["custom_id"],
            "response": {"status_code": reply.status, "request_id": f"vllm-batch-{number}",
                         "body": _completion(line["body"], reply) if ok else None},
            "error": None if ok else (reply.text or "engine error"),
        }))
    return output
