"""Rounds on disk, for an offline engine (`--batch-files DIR`): each round's requests written to
`DIR/round-NNN.input.jsonl`, its answers read from `round-NNN.output.jsonl`, and the stop
(`RoundsWaiting`, exit 75) that says what to run while an output file is missing or unfinished."""

from __future__ import annotations

import asyncio
import re
import shlex
import weakref
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuqa_builder.errors import Paused
from cuqa_builder.jsonio import atomic_write_text
from cuqa_builder.llm.batch.ledger import Sender, Waiting
from cuqa_builder.llm.batch.wire import (
    OutputFile,
    RoundFileError,
    decoded,
    read_output,
)
from cuqa_builder.llm.cache_batches import Submission, SubmittedRequest
from cuqa_builder.llm.types import ChatRequest

_ROUND_FILE = re.compile(r"^round-(\d+)\.(?:input|output)\.jsonl$")


class FileRounds(Sender):
    """Writes one model's rounds as files in a directory and reads the engine's answers."""

    kind = "files"

    def __init__(self, *, directory: Path, accept_partial: bool, **shared: Any) -> None:
        super().__init__(**shared)
        self._directory = directory
        self._accept_partial = accept_partial  # read an output file that answers only some

    async def before_round(self) -> None:
        """Nothing to finish from a killed process: a round file is its own record."""

    async def submit(self, items: list[Waiting]) -> list[Submission]:
        by_key = {item.key: item for item in items}
        first = next_round_number(self._directory)
        try:
            parts = self._writer.parts(
                [(item.key, item.request) for item in items],
                lambda i: self._directory / f"round-{first + i:03d}.input.jsonl",
            )
        except OSError as exc:  # its calls were asked of no one: the next run writes them
            raise RoundFileError(
                f"cannot write the round file in {self._directory} ({exc.strerror}): "
                "--batch-files needs a directory this command may write"
            ) from exc
        submissions = []
        for part in parts:
            submission = Submission(id=str(part.path.resolve()), kind="files", model=self._model,
                                    input=str(part.path), requests=len(part.keys))
            self._cache.open_batch(submission, [by_key[k].submitted for k in part.keys])
            submissions.append(submission)
        self._count_written(submissions)
        return submissions

    async def settle(self, submissions: list[Submission], waiting: dict[str, Waiting]) -> None:
        """Read each complete output file; stop (Paused) while any is missing or unfinished."""
        missing: list[Submission] = []
        unfinished: list[str] = []
        for submission in submissions:
            output = output_path(Path(submission.input))
            if not output.exists():
                missing.append(submission)
                continue
            answers = read_output(decoded(output.read_bytes(), output.name), output.name)
            problem = self._incomplete(submission, answers)
            if problem:
                unfinished.append(problem)
                continue
            self._ledger.close(submission, answers.lines, waiting,
                               missing=f"no answer in {output.name}")
        if missing or unfinished:
            waits = _waits_here()
            waits.notes += unfinished
            waits.notes += [self._write_again(s) for s in missing if not Path(s.input).exists()]
            waits.missing.update((s.id, s) for s in missing)
            raise RoundsWaiting(waits)

    def _incomplete(self, submission: Submission, answers: OutputFile) -> str | None:
        """Why a round's output file is not read yet, or None: every request has a line (an
        answer or a failure), or `accept_partial` takes some. One that answers none is most
        likely the wrong file."""
        source = Path(submission.input)
        output = output_path(source)
        requests = self._cache.batch_keys(submission.id)
        answered = len({line.custom_id for line in answers.lines} & requests)
        if not answered:
            return (f"{output} answers 0 of its {len(requests)} requests (wrong file?): no "
                    "line holds one of their custom_ids. If the engine is still writing it, run "
                    "again once it has finished; else replace it with the engine's output for "
                    f"{source.name}")
        if answered + answers.unreadable >= len(requests) or self._accept_partial:
            return None
        return (f"{output.name}: {answered} of {len(requests)} answered; is the engine still "
                "writing? Run again once it has finished, or add --accept-partial-round to "
                "take these answers and ask the rest in the next round")

    def _write_again(self, submission: Submission) -> str:
        recorded = self._cache.batch_requests(submission.id)
        lines = [self._writer.line(key, _recorded_request(request))
                 for key, request in recorded.items()]
        path = Path(submission.input)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, "".join(lines))
        return (f"{path} was gone: written again from the {len(lines)} requests the call "
                "cache recorded for it")


@dataclass
class _Waits:
    """What the rounds of one stage wait for, every model's: the message of the stop names them
    all, whichever model's round stopped the stage first (another model's round may be written
    after it, before the stage ends)."""

    notes: list[str] = field(default_factory=list)  # unfinished outputs, inputs written again
    # rounds without an output file, by id (two gateways of one model may wait for one file)
    missing: dict[str, Submission] = field(default_factory=dict)

    def message(self) -> str:
        if not self.missing:
            return "\n".join(self.notes)
        missing = sorted(self.missing.values(), key=lambda s: s.input)
        calls: Counter[str] = Counter()
        for submission in missing:
            calls[submission.model] += submission.requests
        models = "" if len(calls) == 1 else (
            f" of {len(calls)} models ({', '.join(f'{m} {n}' for m, n in calls.items())})")
        commands = "\n".join(
            "  python -m vllm.entrypoints.openai.run_batch -i "
            f"{shlex.quote(s.input)} -o {shlex.quote(str(output_path(Path(s.input))))} "
            f"--model {shlex.quote(s.model)}"
            for s in missing
        )
        files = f"{len(missing)} batch file{'s' if len(missing) > 1 else ''}"
        return "\n".join([
            *self.notes,
            f"waiting for the answers to {calls.total()} calls in {files}{models}; answer "
            f"{'them' if len(missing) > 1 else 'it'} with an offline engine, e.g. vLLM:\n"
            f"{commands}\nthen run this command again to read them and go on"])


class RoundsWaiting(Paused):
    """The stop of a stage whose rounds wait for an offline engine: its message, made when it is
    told, names every round the stage waits for."""

    def __init__(self, waits: _Waits) -> None:
        super().__init__(waits)
        self.waits = waits

    def __str__(self) -> str:
        return self.waits.message()


_WAITS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Waits] = (
    weakref.WeakKeyDictionary())


def _waits_here() -> _Waits:
    """The waits of the stage on this event loop (one loop per stage)."""
    return _WAITS.setdefault(asyncio.get_running_loop(), _Waits())


def _recorded_request(submitted: SubmittedRequest) -> ChatRequest:
    """The call a recorded request was made from (its canonical JSON holds every sent field)."""
    request = ChatRequest.model_validate_json(submitted.request)
    return request.model_copy(update={"template": submitted.template,
                                      "template_hash": submitted.template_hash})


def output_path(input_path: Path) -> Path:
    """Where the engine writes the answers of round file `input_path`."""
    return input_path.with_name(input_path.name.replace(".input.jsonl", ".output.jsonl"))


def next_round_number(directory: Path) -> int:
    numbers = [int(m.group(1)) for p in directory.glob("round-*.jsonl")
               if (m := _ROUND_FILE.match(p.name))]
    return max(numbers, default=0) + 1
