"""The batch file format (the OpenAI batch format, which vLLM reads too): input lines written at
the provider's limits, output and error lines read back, and which of them failed and why."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, model_validator

from cuqa_builder.errors import CuqaError, describe_validation_error
from cuqa_builder.llm.types import ChatRequest, LLMError

log = logging.getLogger(__name__)

CHAT_URL = "/v1/chat/completions"
COMPLETIONS_URL = "/v1/completions"  # with `--api completions`
_TRANSIENT_STATUS = frozenset({408, 409, 429})


class RoundFileError(CuqaError):
    """A round's output file that cannot be read at all: the round stays open."""


class InputLine(BaseModel):
    """One line of a batch input file (the OpenAI batch format, which vLLM reads too)."""

    custom_id: str
    method: Literal["POST"] = "POST"
    url: str = CHAT_URL
    body: dict[str, Any]


class LineResponse(BaseModel):
    status_code: int = 200
    request_id: str | None = None
    body: dict[str, Any] | None = None


class OutputLine(BaseModel):
    """One line of a batch output or error file."""

    id: str | None = None
    custom_id: str
    response: LineResponse | None = None
    error: Any = None


class _LineId(BaseModel):
    """Just the request a line answers: enough to ask it again when the rest is malformed."""

    custom_id: str


class _Usage(BaseModel):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class _Message(BaseModel):
    content: str | None = None


class _Choice(BaseModel):
    message: _Message | None = None
    text: str | None = None
    finish_reason: str | None = None
    logprobs: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _message_or_text(self) -> _Choice:
        if self.message is None and self.text is None:
            raise ValueError("a choice needs a message or a text")
        return self


class AnswerBody(BaseModel):
    """The parts of a completion that its answer is read from (the body is stored whole): a
    line whose body lacks them, or holds `"usage": "lots"`, is a malformed line."""

    choices: list[_Choice] = Field(min_length=1)
    usage: _Usage | None = None


@dataclass
class OutputFile:
    """The typed lines of one output (or error) file."""

    lines: list[OutputLine]
    unreadable: int = 0  # whole lines that name no request (a torn last line is not one)


@dataclass(frozen=True)
class Part:
    """One input file written, and the keys of its requests in order."""

    path: Path
    keys: list[str]


@dataclass(frozen=True)
class InputWriter:
    """Writes calls as batch input lines, a new file whenever the next line would pass one of
    the provider's limits (requests and bytes per file)."""

    model: str
    url: str
    body_of: Callable[[ChatRequest], dict[str, Any]]  # a call as a live call would send it
    max_requests: int
    max_bytes: int

    def line(self, key: str, request: ChatRequest) -> str:
        return json.dumps(
            {"custom_id": key, "method": "POST", "url": self.url,
             "body": self.body_of(request)}, ensure_ascii=False, separators=(",", ":"),
        ) + "\n"

    def parts(self, calls: list[tuple[str, ChatRequest]],
              path_for: Callable[[int], Path]) -> list[Part]:
        """Write the input files of (key, request) calls; file i goes to `path_for(i)`."""
        parts: list[Part] = []
        handle = None
        size = 0
        try:
            for key, request in calls:
                line = self.line(key, request).encode()
                if len(line) > self.max_bytes:
                    raise LLMError(f"{self.model}: one request is {len(line)} bytes, more "
                                   f"than a batch file may hold ({self.max_bytes})",
                                   model=self.model)
                if handle is None or len(parts[-1].keys) >= self.max_requests \
                        or size + len(line) > self.max_bytes:
                    if handle is not None:
                        handle.close()
                    path = path_for(len(parts))
                    path.parent.mkdir(parents=True, exist_ok=True)
                    handle = path.open("wb")
                    parts.append(Part(path, []))
                    size = 0
                handle.write(line)
                size += len(line)
                parts[-1].keys.append(key)
        finally:
            if handle is not None:
                handle.close()
        return parts


def line_failure(line: OutputLine) -> tuple[bool, str] | None:
    """None for an answer; else (transient?, reason) for a failed line."""
    response = line.response
    if line.error is None and response is not None and response.status_code == 200 \
            and response.body is not None:
        return None
    status = response.status_code if response is not None else None
    error = line.error if isinstance(line.error, dict) else {"message": line.error}
    code = str(error.get("code") or "")
    message = str(error.get("message") or (response.body if response else "") or "no answer")
    transient = (status is None or status in _TRANSIENT_STATUS or status >= 500
                 or code in {"batch_expired", "batch_cancelled"})
    return transient, f"{f'HTTP {status}: ' if status else ''}{code + ': ' if code else ''}" \
                      f"{message[:200]}"


def read_output(text: str, source: str) -> OutputFile:
    """Typed output lines. A line with an unusable answer becomes a failed line of its request
    (named by file and line, so it is asked again); one that names no request is skipped with a
    warning (an engine killed mid-line leaves half a line at the end)."""
    read = OutputFile(lines=[])
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        if not line.strip():
            continue
        try:
            read.lines.append(_typed_line(line))
        except ValidationError as exc:
            where = f"{source}:{number}"
            try:
                request = _LineId.model_validate_json(line)
            except ValidationError:
                log.warning("%s: not a batch output line; skipped", where)
                read.unreadable += line.endswith("\n")
                continue
            reason = f"{where}: malformed line ({describe_validation_error(exc)})"
            log.warning("%s; its request is asked again", reason)
            read.lines.append(OutputLine(custom_id=request.custom_id,
                                         error={"message": reason}))
    return read


def _typed_line(text: str) -> OutputLine:
    line = OutputLine.model_validate_json(text)
    if line.response is not None and line.response.status_code == 200 \
            and line.response.body is not None:
        AnswerBody.model_validate(line.response.body)
    return line


def decoded(data: bytes, source: str) -> str:
    """An output file's text; one that is no UTF-8 stops the run (`RoundFileError`)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RoundFileError(
            f"{source} is not UTF-8 text (byte {exc.start} cannot be read): batch output is "
            "UTF-8 JSONL; write it again as UTF-8, or delete it to answer its round again"
        ) from None
