"""The ground stage: each candidate's entity articles as they were at the end of the cutoff.

For every easy item (and the easy items inside hard ones) it looks up the bridge `cur_ent`,
which is also the answer of an AAB item, and for ABC items the known answer `k_ent` unless the
bridge's article already names it. Lookups and articles are kept in the run (`articles.jsonl`,
`pages/articles/`), so a re-run asks nothing twice; with `--source DIR` they are read offline.
Every article found is read once here, so that the summary counts those read from their
wikitext (MediaWiki's rendering refused, damaged or unsound) and the warnings name them.
The verdicts themselves are the validate stage's: this stage only gathers the evidence, so
validation stays offline and cheap to re-run.
"""

from __future__ import annotations

from collections.abc import Iterator

from cuqa_builder.grounding.articles import open_article_store
from cuqa_builder.grounding.verdicts import Grounder
from cuqa_builder.jsonio import read_jsonl
from cuqa_builder.records.candidates import Candidate, Intermediates
from cuqa_builder.run import ARTICLES, CANDIDATES, RunContext


def easy_steps(candidate: Candidate) -> Iterator[Intermediates]:
    """The Algorithm 1 intermediates of an easy item, or of each easy item in a hard one."""
    if candidate.intermediates is not None:
        yield candidate.intermediates
    for sub in candidate.sub_items:
        yield from easy_steps(sub)


def run(ctx: RunContext) -> str:
    steps = [s for c in read_jsonl(ctx.path(CANDIDATES), Candidate) for s in easy_steps(c)]
    store = open_article_store(ctx)
    bridges = store.ensure_shown([s.cur_ent for s in steps], "bridges", ctx.options.quiet)
    grounder = Grounder(store, ctx.window.cutoff)
    answers = [s.k_ent for s in steps
               if s.k_ent is not None and not grounder.bridge_names_answer(s.cur_ent, s.k_ent)]
    known = store.ensure_shown(answers, "known answers", ctx.options.quiet)
    for entity in [*(s.cur_ent for s in steps), *answers]:
        store.text(store.lookup(entity))
    where = f"from {store.source}" if store.source else f"from {ctx.options.source.wiki_api}"
    return (
        f"ground: articles at the end of {ctx.window.cutoff} {where} for {len(steps)} easy items\n"
        f"  bridges: {bridges.line()}\n"
        f"  known answers not named by the bridge's article: {known.line()}\n"
        + "".join(f"  {line}\n" for line in store.wikitext_lines())
        + f"  -> {ctx.path(ARTICLES)}"
        + (f" (the articles read from {store.folder}, nothing written there)" if store.source
           else f", {store.folder}")
    )
