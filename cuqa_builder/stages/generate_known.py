"""--known-source wiki: the articles the generator reads about an event's named things, as
they were at the cutoff (looked up once and kept), and the events none of whose bridges had one."""

from __future__ import annotations

from cuqa_builder.generation.algorithm import Generator, KnownArticle
from cuqa_builder.grounding.articles import ArticleStore, open_article_store
from cuqa_builder.grounding.keys import entity_key
from cuqa_builder.records.events import Entity, Event
from cuqa_builder.run import RunContext
from cuqa_builder.stages.generate_tally import Tally


def known_articles(
    ctx: RunContext, events: list[Event], tally: Tally
) -> dict[str, KnownArticle]:
    """--known-source wiki: every entity's article at the cutoff (looked up once, kept)."""
    store = open_article_store(ctx)
    entities = [entity for event in events for entity in event.entities]
    tally.articles = "; ".join([
        store.ensure_shown(entities, "articles", ctx.options.quiet).line(),
        *store.wikitext_lines()])
    return _passages(store, entities)


def with_a_known_bridge(
    events: list[Event], known: dict[str, KnownArticle], tally: Tally, generator: Generator
) -> list[Event]:
    """--known-source wiki: an event none of whose bridges had an article at the cutoff has no
    bridge to ask about (a finding of the lookups, not a failure to retry): it is skipped."""
    usable = [e for e in events
              if any(entity_key(x) in known for x in generator.bridge_candidates(e))]
    tally.no_article = len(events) - len(usable)
    kept = {e.id for e in usable}
    tally.skipped += [(e.id, "no named thing of the event had a Wikipedia article at the "
                       "cutoff (--known-source wiki)") for e in events if e.id not in kept]
    return usable


def _passages(store: ArticleStore, entities: list[Entity]) -> dict[str, KnownArticle]:
    known: dict[str, KnownArticle] = {}
    for entity in entities:
        lookup = store.lookup(entity)
        text = store.text(lookup)
        if lookup is None or text is None:
            continue
        if text.passage:
            known[entity_key(entity)] = KnownArticle(
                passage=text.passage, links=text.lead_links,
                evidence=store.evidence(lookup, text.lead[:1]), kind=text.kind,
                relations=[r for r in text.relations if r.values and text.sentences_naming(
                    [r.values[0].text, r.values[0].title], limit=1)],
                names=text.names, definite=text.definite,
                size=sum(len(sentence) for sentence in text.sentences),
            )
    return known
