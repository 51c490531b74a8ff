"""The run directory: where every stage reads its input and writes its one output file."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from cuqa_builder.jsonio import atomic_write_json
from cuqa_builder.window import Window

PAGES_DIR = "pages"
MANIFEST = "manifest.json"
EVENTS = "events.jsonl"
CANDIDATES = "candidates.jsonl"
DATASET = "cuqa.jsonl"
RUN_INFO = "run.json"
LLM_CACHE = "llm-cache.sqlite"


@dataclass
class RunContext:
    """What a stage needs: the run directory, the window and the command-line options."""

    out: Path
    window: Window
    options: argparse.Namespace

    @property
    def pages_dir(self) -> Path:
        return self.out / PAGES_DIR

    def path(self, name: str) -> Path:
        return self.out / name


def load_run_info(out: Path) -> dict:
    path = out / RUN_INFO
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def save_run_info(out: Path, **updates: object) -> None:
    """Record the settings a dataset depends on (cutoff, seed, models...) for rebuilding it."""
    info = load_run_info(out)
    info.update({k: v for k, v in updates.items() if v is not None})
    atomic_write_json(out / RUN_INFO, info)
