"""`cuqa-build` end to end: a local api.php and a scripted OpenAI-compatible model, every stage.

The api.php serves the example snapshot's year article and its entity articles; the known
passages are the articles' leads (`--known-source wiki`), since the scripted model's own
"knowledge" is made up and rightly fails grounding."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import cuqa_builder
from cuqa_builder.cli.annotate import main as annotate
from cuqa_builder.cli.build import main
from cuqa_builder.llm.local_registry import REGISTRY
from cuqa_builder.run import ARTICLE_PAGES
from cuqa_builder.snapshot import articles_dir, iter_snapshot
from cuqa_builder.testing.algorithm_llm import AlgorithmResponder
from cuqa_builder.testing.mediawiki_server import MediaWikiServer
from cuqa_builder.testing.openai_server import ScriptedLLM
from tests.documentation import docs_page

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "examples" / "wiki-sample"


def _sample_pages(folder: Path = SAMPLE) -> dict[str, tuple[int, str, str]]:
    pages = {}
    for page in iter_snapshot(folder):
        assert not isinstance(page, Exception), page
        pages[page.meta.title] = (page.meta.revid, page.meta.timestamp, page.wikitext)
    return pages


def _redirects() -> dict[str, str]:
    return {page.meta.redirect: page.meta.title for page in iter_snapshot(articles_dir(SAMPLE))
            if not isinstance(page, Exception) and page.meta.redirect}


@pytest.fixture
def servers(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-pipeline-key")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    articles = _sample_pages(articles_dir(SAMPLE))
    del articles["Titanic"]  # the fifth event's only entity with an article then
    pages = {**_sample_pages(), **articles}
    with MediaWikiServer(pages, redirects=_redirects()) as wiki, \
            ScriptedLLM(AlgorithmResponder()) as llm:
        yield wiki, llm


def _build(wiki: MediaWikiServer, llm: ScriptedLLM, tmp_path: Path) -> int:
    return main([
        "--cutoff", "2023-04", "--prompts", "paper", "--until", "2023-12-31", "--out",
        str(tmp_path / "run"),
        "--wiki-api", wiki.api_url, "--wiki-interval", "0", "--sources", "year",
        "--base-url", llm.base_url, "--model", "scripted", "--limit", "5", "--hard", "1",
        "--name", "sample", "--output-root", str(tmp_path / "output"), "--quiet",
        "--known-source", "wiki",
        # The scripted paper recipe's answers come from nowhere: no checker could verify them.
        "--check-model", "none",
    ])


def test_every_stage_runs_and_a_rerun_pays_nothing(servers, tmp_path: Path, capsys) -> None:
    wiki, llm = servers
    assert _build(wiki, llm, tmp_path) == 0
    run = tmp_path / "run"
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["pages"] == {"2023": _sample_pages()["2023"][0]}
    candidates = [json.loads(line) for line in (run / "candidates.jsonl").open()]
    easy = [c["difficulty"] for c in candidates].count("easy")
    # the server has articles for the entities of the first four events, not the fifth
    assert easy == 4 and all(  # the one event without an article, not tried
        json.loads(line)["step"] == "Select"
        for line in (run / "generation-failures.jsonl").read_text().splitlines())
    assert [c["difficulty"] for c in candidates].count("hard") == 1
    assert all(c["validation"] is not None for c in candidates)
    release = tmp_path / "output" / "sample"
    assert {p.name for p in release.iterdir()} >= {
        "cuqa.jsonl", "schema.json", "README.md", "stats.json", "manifest.json",
    }
    items = cuqa_builder.load(release)
    passed = sum(c["validation"]["passed"] for c in candidates)
    assert len(items) == passed > 0
    assert all(item.cutoff == "2023-04" and item.review.status == "unreviewed" for item in items)
    run_info = json.loads((run / "run.json").read_text())
    assert run_info["cutoff"] == "2023-04" and run_info["seed"] == 0
    # the evaluation page indexes the articles where the ground stage wrote them
    assert any((run / ARTICLE_PAGES).glob("*.wiki"))
    indexed = re.findall(r"cuqa-eval index [^`]*?--pages (\S+)", docs_page("evaluation.md"))
    assert indexed and all(folder.endswith(f"/{ARTICLE_PAGES}") for folder in indexed)

    calls, requests = llm.calls, len(wiki.requests)
    capsys.readouterr()
    assert _build(wiki, llm, tmp_path) == 0
    assert llm.calls == calls, "a re-run made LLM calls again"
    assert len(wiki.requests) == requests, "a re-run fetched pages again"
    assert len((run / "candidates.jsonl").read_text().splitlines()) == len(candidates)
    assert "sk-test-pipeline-key" not in "".join(
        p.read_text(errors="ignore") for p in run.rglob("*") if p.is_file()
    )


def revision_links(run: Path) -> list[str]:
    assert annotate(["export", "--run", str(run), "--only", "all"]) == 0
    tasks = json.loads((run / "label-studio-tasks.json").read_text())
    assert tasks
    return [task["data"]["revision_link"] for task in tasks]


def test_review_tasks_link_fetched_revisions_only(servers, tmp_path: Path) -> None:
    """The shipped snapshot's revision ids are placeholders (1, 2...): on Wikipedia they are
    ancient, unrelated revisions, so its tasks must not link them; fetched pages are real."""
    wiki, llm = servers
    assert _build(wiki, llm, tmp_path) == 0
    fetched = revision_links(tmp_path / "run")
    index = wiki.api_url.removesuffix("api.php") + "index.php"
    assert all(link.startswith(f'<a href="{index}?title=') and "&amp;oldid=" in link
               for link in fetched)

    snapshot_run = tmp_path / "from-snapshot"
    assert main([
        "--cutoff", "2023-04", "--prompts", "paper", "--until", "2023-12-31", "--out",
        str(snapshot_run),
        "--source", str(SAMPLE), "--sources", "year", "--base-url", llm.base_url,
        "--model", "scripted", "--limit", "3", "--quiet",
    ]) == 0
    for link in revision_links(snapshot_run):
        assert "<a" not in link and "oldid" not in link
        assert f"from the local snapshot {SAMPLE}: not a verified Wikipedia revision" in link


def _validated(run: Path) -> dict[str, tuple[bool, list[str]]]:
    candidates = [json.loads(line) for line in (run / "candidates.jsonl").open()]
    return {c["id"]: (c["validation"]["passed"],
                      [f["reason"] for f in c["validation"]["failures"]]) for c in candidates}


@pytest.fixture
def snapshot_run(servers, tmp_path: Path) -> Path:
    """A run built offline from a copy of the sample snapshot, validated."""
    _, llm = servers
    snapshot, run = tmp_path / "snapshot", tmp_path / "run"
    shutil.copytree(SAMPLE, snapshot)
    assert main([
        "--cutoff", "2023-04", "--until", "2023-12-31", "--out", str(run), "--source",
        str(snapshot), "--sources", "year", "--base-url", llm.base_url, "--model", "scripted",
        "--limit", "5", "--known-source", "wiki", "--quiet", "--prompts", "paper",
        "--check-model", "none",  # nothing could verify the scripted paper recipe's answers
    ]) == 0
    return run


def test_validate_without_source_reads_the_snapshot_the_run_was_built_from(
    snapshot_run: Path, caplog: pytest.LogCaptureFixture
) -> None:
    before = _validated(snapshot_run)
    assert any(passed for passed, _ in before.values())
    caplog.clear()
    assert main(["--out", str(snapshot_run), "--stage", "validate", "--quiet",
                 "--check-model", "none"]) == 0
    assert _validated(snapshot_run) == before
    assert "no sidecar" not in caplog.text


def test_validate_without_source_refuses_when_the_snapshot_is_gone(
    snapshot_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = {p: p.read_bytes() for p in snapshot_run.rglob("*") if p.is_file()}
    snapshot = snapshot_run.parent / "snapshot"
    snapshot.rename(snapshot_run.parent / "moved")
    capsys.readouterr()
    assert main(["--out", str(snapshot_run), "--stage", "validate", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert f"{snapshot_run} was built from the snapshot {snapshot}, which is not there" in err
    assert "--source" in err
    assert {p: p.read_bytes() for p in snapshot_run.rglob("*") if p.is_file()} == files


def test_ground_from_a_snapshot_says_it_only_read_the_articles_there(
    snapshot_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = snapshot_run.parent / "snapshot"
    files = {p: p.read_bytes() for p in snapshot.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert main(["--out", str(snapshot_run), "--stage", "ground"]) == 0
    out = capsys.readouterr().out
    assert (f"  -> {snapshot_run / 'articles.jsonl'} (the articles read from "
            f"{articles_dir(snapshot)}, nothing written there)") in out
    assert {p: p.read_bytes() for p in snapshot.rglob("*") if p.is_file()} == files


def test_a_validate_refused_for_shrinking_the_dataset_writes_nothing(
    snapshot_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = {p: p.read_bytes() for p in snapshot_run.rglob("*") if p.is_file()}
    capsys.readouterr()
    # every question is longer than two words: nothing would pass
    assert main(["--out", str(snapshot_run), "--stage", "validate", "--quiet",
                 "--min-question-words", "1", "--max-question-words", "2"]) == 1
    assert "nothing was written" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in snapshot_run.rglob("*") if p.is_file()} == files


def test_the_embedded_model_starts_only_for_a_call_the_cache_cannot_answer(
    servers, tmp_path: Path
) -> None:
    """A re-run served from the cache and a run with --limit 0 never load the embedded model
    (its models folder holds a file that is no model: loading it would fail); -q leaves no INFO
    line; --limit 0 says it has nothing to do."""
    _, llm = servers
    small = "smollm2-135m-instruct-q4_1"
    run = tmp_path / "run"
    common = ["--cutoff", "2023-04", "--until", "2023-12-31", "--source", str(SAMPLE),
              "--prompts", "paper", "--limit", "3", "-q"]
    # the scripted model answers under the embedded model's name: the same cache keys
    assert main(["--out", str(run), *common, "--base-url", llm.base_url, "--model", small]) == 0
    models = tmp_path / "models"
    models.mkdir()
    fake = models / REGISTRY[small].filename
    fake.write_bytes(b"not a model")
    (models / f"{fake.name}.sha256").write_text(f"{REGISTRY[small].sha256} {fake.stat().st_size}")
    env = {key: value for key, value in os.environ.items()
           if key not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    env["CUQA_MODELS_DIR"] = str(models)

    def build(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "cuqa_builder.cli.build", *argv,
                               "--llm", f"local:{small}"], capture_output=True, text=True,
                              env=env, timeout=300)

    calls = llm.calls
    again = build("--out", str(run), *common)
    assert again.returncode == 0, again.stderr
    assert "LLM smollm2-135m-instruct-q4_1: 0 calls" in again.stdout
    nothing = build("--out", str(tmp_path / "none"), *common[:-3], "--limit", "0", "-q")
    assert nothing.returncode == 0, nothing.stderr
    assert nothing.stdout.startswith("events: ") and "generate: nothing to do: --limit 0 " \
        "takes no event" in nothing.stdout
    for done in (again, nothing):
        assert "served at" not in done.stderr and "INFO" not in done.stderr, done.stderr
    assert llm.calls == calls
