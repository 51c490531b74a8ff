"""How many CPU cores this process may use (the scheduler's affinity, not the machine's count)."""

from __future__ import annotations

import os


def available_cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)
