"""An event's pool (issue 33): every described bridge × each of its known hops, composed into a
question, ranked before any check by what predicts that it survives them, and the best kept.

An event holds several bridges and each bridge several lasting properties; most of them make a
guessable question, a few do not. Which ones is not known before asking, but some signs are
(`rank`): a property with many possible answers (a birthplace, a district) survives far more
often than one with few (a currency, a language, a capital a guess about the news's country
names); a little-known bridge (a short article at the cutoff) more often than a famous one; a
country the news points to hardly ever.

The merge is no call: the merged question is the known question with the bridge's name
replaced by its description ("What is the birthplace of the politician who ...?"), or "Which
of the districts of X is the district where ...?" (AAB); cutting the description to its head
masks the event ("What is the birthplace of a certain politician?").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cuqa_builder.generation.algorithm import (
    KnownArticle,
)
from cuqa_builder.generation.known_facts import CATEGORY, Hop
from cuqa_builder.generation.seeding import candidate_id
from cuqa_builder.generation.structural import plural
from cuqa_builder.grounding.keys import entity_key
from cuqa_builder.records.events import Entity, Event
from cuqa_builder.records.items import QuestionType
from cuqa_builder.text import contains_answer
from cuqa_builder.verification.masking import masked_description
from cuqa_builder.verification.names import canonical_name, substitute, surface_name
from cuqa_builder.verification.question_form import category_question


@dataclass(frozen=True)
class Bridge:
    """A named thing of the event taken as a bridge."""

    entity: Entity  # as the event names it, cleaned
    key: str  # its article's key
    names: list[str]  # every name a question could call it by
    kind: str  # what it is, in a plain word: "island", "company", "person"
    article: KnownArticle | None  # its article at the cutoff, when there is one


@dataclass(frozen=True)
class Draft:
    """One question of the pool, before the checks."""

    id: str
    bridge: Bridge
    description: str
    hop: Hop
    answer: str
    aliases: list[str]
    known_question: str
    question: str
    masked: str
    rank: float

    @property
    def branch(self) -> QuestionType:
        return "AAB" if self.hop.category is not None else "ABC"


def answer_names(entity: Entity, article: KnownArticle | None) -> tuple[str, list[str]]:
    """The canonical answer and its aliases: the name as written, and with the entity's article
    at hand its title (where a redirect led) and the bold names of its lead."""
    answer = canonical_name(entity)
    names = [surface_name(entity.text)]
    if article is not None:
        names += [article.evidence.title, *article.names]
    aliases = [n for n in dict.fromkeys(names) if n.casefold() != answer.casefold()]
    return answer, aliases


def unknown_question(kind: str, description: str) -> str:
    verb = "are" if plural(kind) else "is"  # "What are the islands where ...?"
    return f"{'Who' if kind == 'person' else 'What'} {verb} {description}?"


def compose(seed: int, event: Event, bridge: Bridge, description: str, hop: Hop,
            known: dict[str, KnownArticle], pointed: frozenset[str]) -> Draft | str:
    """The pool's question of one bridge and one hop, or why it cannot be asked."""
    masked = masked_description(description)
    if hop.category is not None:
        answer, aliases = answer_names(bridge.entity, bridge.article)
        known_question = category_question(hop.category)
        question = f"Which of the {hop.category} is {description}?"
        masked_question = f"Which of the {hop.category} is {masked}?"
    else:
        assert hop.question is not None and hop.answer is not None
        answer, aliases = answer_names(hop.answer, known.get(entity_key(hop.answer)))
        known_question = hop.question
        merged = substitute(hop.question, bridge.names, description)
        masked_merged = substitute(hop.question, bridge.names, masked)
        if merged is None or masked_merged is None:
            return f"{hop.question!r} does not name {bridge.entity.text!r} as written"
        question, masked_question = merged, masked_merged
    # A question that names its own answer (a description saying "born in X") is dropped here,
    # before any check is paid for it: validate's answer_in_question would fail it anyway.
    named = next((form for form in (answer, *aliases)
                  if contains_answer(question, form, in_compounds=True)), None)
    if named is not None:
        return f"the question names its own answer {named!r}: {question!r}"
    return Draft(
        id=candidate_id(seed, event.id, bridge.key, hop.property, answer), bridge=bridge,
        description=description, hop=hop, answer=answer, aliases=aliases,
        known_question=known_question, question=question, masked=masked_question,
        rank=rank(bridge, hop, answer, pointed),
    )


# How often a property's questions survived the guesses, as a prior (issue 33's pool measured
# outside the pipeline on 55 events: what survives is specific, a little-known person's
# birthplace, a small place's district, a team's federation; what fails is a capital, currency
# or founder of a thing the news points to, a country, a language). Other properties: 0.5.
_PROPERTY_PRIOR = {
    "birthplace": 1.0, "district": 1.0, "county": 0.9, "municipality": 0.9, "alma mater": 0.8,
    "governing body": 0.8, "governorate": 0.8, "region": 0.7, "province": 0.7, "state": 0.6,
    "seat": 0.6, "administrative centre": 0.6, "home ground": 0.6, "location": 0.6,
    "archipelago": 0.5, "highest mountain": 0.5, CATEGORY: 0.5, "founder": 0.4,
    "largest city": 0.3, "capital": 0.3, "country": 0.1, "language": 0.1, "currency": 0.05,
}
_DEFAULT_PRIOR = 0.5
_POINTED_TO = 0.1  # an answer any guess about the news's country names
_COUNTRY_BRIDGE = 0.3  # a country the news happened in is rarely hard to name
_FAMOUS_SIZE = 30_000  # characters of text at which a bridge counts half as obscure


def rank(bridge: Bridge, hop: Hop, answer: str, pointed: frozenset[str]) -> float:
    """How likely the question is to survive the checks, before any is asked (higher first)."""
    score = _PROPERTY_PRIOR.get(hop.property, _DEFAULT_PRIOR)
    if answer.casefold() in pointed:
        score *= _POINTED_TO
    if bridge.kind == "country":
        score *= _COUNTRY_BRIDGE
    if bridge.article is not None and bridge.article.size:
        score /= 1 + bridge.article.size / _FAMOUS_SIZE
    return round(score, 4)


# Infobox rows whose value any guess about a country names: its capital, largest city,
# currency, languages.
_POINTED_PARAMETERS = ("capital", "largest_city", "currency", "official_languages",
                       "languages", "national_languages")


def pointed_to(event: Event, known: dict[str, KnownArticle]) -> frozenset[str]:
    """The names of what the news points to without naming it: the capital, largest city,
    currency or language of a place it names (lower case)."""
    names: set[str] = set()
    for entity in event.entities:
        article = known.get(entity_key(entity))
        if article is None:
            continue
        for relation in article.relations:
            if (relation.parameter or "").lower().startswith(_POINTED_PARAMETERS):
                names.update(n.casefold() for link in relation.values
                             for n in (link.text, link.title))
    return frozenset(names)


def ranked(drafts: Iterable[Draft]) -> list[Draft]:
    """The pool best first; equal ranks in a fixed order (by id)."""
    return sorted(drafts, key=lambda d: (-d.rank, d.id))


def keep(drafts: Sequence[Draft], count: int) -> list[Draft]:
    """Up to `count` of the ranked drafts, each of another bridge and another property."""
    kept: list[Draft] = []
    for draft in drafts:
        if len(kept) == count:
            break
        if all(d.bridge.key != draft.bridge.key and d.hop.property != draft.hop.property
               for d in kept):
            kept.append(draft)
    return kept

