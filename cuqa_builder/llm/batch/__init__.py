"""Batch rounds: many calls answered together, by a provider's Batch API or an offline engine.

In batch mode the gateway does not send a call when it is asked: the caller's coroutine waits on
a future here. When no new call has come for a moment, every coroutine of the run is waiting on
an answer (all of Algorithm 1's first step for every event, then the next step, and so on), and
the waiting calls are flushed as one round. Work that runs off the event loop and leads to a call
(spaCy on a known passage) says so with `outside_work()`, and the round waits for it.

1. Calls that a batch recorded in the cache already holds (a killed process asked them before)
   wait for that batch instead of being sent again.
2. The rest are written as batch input JSONL (`custom_id` = the call's cache key), split at the
   provider's limits (requests and bytes per file), and submitted: uploaded and created through
   the Batch API (`--batch`), or left in `DIR/round-NNN.input.jsonl` for an offline engine
   (`--batch-files DIR`). Each submission and its keys are recorded in the cache first: an
   uploaded file before its batch is created, so a process killed while creating it finds the
   batch by its input file on the next run (or creates it then), never a second one.
3. Answers (the output file; failures in the error file, or in the output file as vLLM writes
   them) go into the call cache, and the waiting coroutines go on, asking the next round's calls.

Failed lines are never retried live: a transient failure (429, 5xx, timeout, an expired or
cancelled batch, a line with no answer) joins the next round, up to `--max-retries` times; a
refused request (another 4xx) fails at once, like a refused live call. An expired batch thus
resubmits only what it did not answer. With `--batch-files` the run stops with `Paused` (exit
75) whenever a round's output file is missing, saying what to run, and also when one answers
only part of its round: an engine may still be writing it (`accept_partial` takes what it has and
asks the rest again), and a file that answers none of its requests is most likely the wrong one.
An input file deleted before it was answered is written again from the requests the cache keeps.
A malformed line is one failed line (asked again); an output file that is no UTF-8 text stops the
run with `RoundFileError`.

Where each part lives: `wire.py`, the batch file format (input lines, output lines, failures);
`rounds.py`, the round loop (`Rounds`: collecting calls, flushing them, a round at a time);
`ledger.py`, settling a finished submission's answers and failures; `service.py`, the Batch API
side; `round_files.py`, the `--batch-files` side (round files named, written, read, waited for);
`summary.py`, the batch part of a run's summary. No module here imports `openai`: the Batch API
is reached through `BatchService`, which `gateway.py` implements with the client.
"""
