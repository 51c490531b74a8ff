"""Grounding verdicts: is the known hop true, and was it written down before the cutoff?

`bridge_known_before_cutoff`: the bridge entity (`cur_ent`, which is also the answer of an AAB
item) had a Wikipedia article at the cutoff; an entity that only appeared later (a storm named
after the cutoff) cannot be part of a "known" hop.

`known_hop_grounded`: the articles in force at the cutoff support the known sub-question. ABC:
the bridge's article names the known answer `k_ent` (by name, alias, redirect or link), or
`k_ent`'s article names the bridge. AAB: the known question's named entities are all in the
answer's article and at least half of its content words are. Words are matched by their first
six letters, so "elected" finds "election"; a paraphrase or a fact stated in other words is
missed (a false failure), and a term found elsewhere in a long article may pass a wrong question.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date
from functools import cached_property

from cuqa_builder.grounding.article_text import ArticleText
from cuqa_builder.grounding.articles import ArticleStore
from cuqa_builder.grounding.lookups import ArticleLookup
from cuqa_builder.records.candidates import Candidate
from cuqa_builder.records.events import Entity, answer_aliases
from cuqa_builder.records.items import Evidence, GroundingVerdict
from cuqa_builder.text import contains_answer, normalize_answer

BRIDGE = "bridge_known_before_cutoff"
KNOWN_HOP = "known_hop_grounded"
GROUNDING_CHECKS = (BRIDGE, KNOWN_HOP)
STEM = 6  # letters compared when matching a content word
MIN_TERM_SHARE = 0.5

# (named entities, content words) of each known question; spaCy, batched by the caller
QuestionAnalyser = Callable[[list[str]], list[tuple[list[str], list[str]]]]


def _stem(word: str) -> str:
    return word.casefold()[:STEM]


@dataclass
class _Article:
    """A found article and the forms the checks compare against."""

    lookup: ArticleLookup
    text: ArticleText

    @cached_property
    def normalised(self) -> str:
        return f" {normalize_answer(' '.join(self.text.sentences))} "

    @cached_property
    def stems(self) -> frozenset[str]:
        return frozenset(_stem(w) for w in self.normalised.split())

    def names(self, phrase: str) -> bool:
        """The phrase as written, or all its words in one sentence ("Pellham University" for
        "the University of Pellham")."""
        needle = normalize_answer(phrase)
        if not needle:
            return False
        if f" {needle} " in self.normalised:
            return True
        wanted = {_stem(w) for w in needle.split()}
        return any(wanted <= stems for stems in self.sentence_stems)

    @cached_property
    def sentence_stems(self) -> list[frozenset[str]]:
        return [frozenset(_stem(w) for w in normalize_answer(s).split())
                for s in self.text.sentences]

    def where(self, cutoff: date) -> str:
        return f"{self.lookup.title} as of {cutoff} (revid {self.lookup.revid})"


@dataclass
class Grounder:
    """Judges easy items (and the easy items inside hard ones) against the stored articles."""

    store: ArticleStore
    cutoff: date
    analyse: QuestionAnalyser | None = None  # needed for AAB items only
    _questions: dict[str, tuple[list[str], list[str]]] = field(default_factory=dict)

    def prepare(self, candidates: Sequence[Candidate]) -> None:
        """Analyse every AAB known question at once (one spaCy batch)."""
        wanted = [q for item in candidates for q in _aab_known_questions(item)
                  if q not in self._questions]
        wanted = list(dict.fromkeys(wanted))
        if wanted:
            self._questions.update(zip(wanted, self._analyse(wanted), strict=True))

    def _analyse(self, questions: list[str]) -> list[tuple[list[str], list[str]]]:
        assert self.analyse is not None, "AAB items need a question analyser"
        return self.analyse(questions)

    def bridge_names_answer(self, cur_ent: Entity, k_ent: Entity) -> bool:
        """Whether the bridge's article already names `k_ent` (then k_ent's is not needed)."""
        bridge, _ = self._article(cur_ent)
        if bridge is None:
            return False
        return bool(bridge.text.sentences_naming(_names(k_ent, None, bridge.text)))

    def verdicts(self, candidate: Candidate) -> list[GroundingVerdict]:
        if candidate.difficulty == "hard":
            return [v.model_copy(update={"item": sub.id})
                    for sub in candidate.sub_items for v in self.verdicts(sub)]
        steps = candidate.intermediates
        if steps is None:
            return []
        return [self._bridge(steps.cur_ent),
                self._abc(steps.cur_ent, steps.k_ent) if steps.k_ent else
                self._aab(steps.cur_ent, steps.known_question)]

    # --- the two checks -----------------------------------------------------------------

    def _article(self, entity: Entity) -> tuple[_Article | None, str]:
        """The entity's article at the cutoff, or why there is none (for a reason)."""
        lookup = self.store.lookup(entity)
        if lookup is None:
            return None, f"the article of {entity.text!r} was not looked up (run the ground stage)"
        text = self.store.text(lookup)
        if text is None:
            return None, lookup.reason
        return _Article(lookup, text), lookup.reason

    def _bridge(self, cur_ent: Entity) -> GroundingVerdict:
        article, why = self._article(cur_ent)
        if article is None:
            return GroundingVerdict(
                check=BRIDGE, passed=False,
                reason=f"{cur_ent.text!r} had no article on {self.cutoff} ({why}): the known hop "
                "cannot be known",
            )
        return GroundingVerdict(
            check=BRIDGE, passed=True, reason=f"{cur_ent.text!r} had an article: {why}",
            evidence=[self.store.evidence(article.lookup, article.text.lead[:1])],
        )

    def _abc(self, cur_ent: Entity, k_ent: Entity) -> GroundingVerdict:
        bridge, bridge_why = self._article(cur_ent)
        known, known_why = self._article(k_ent)
        misses: list[str] = []
        for owner, article, no_article, other in ((cur_ent, bridge, bridge_why, k_ent),
                                                  (k_ent, known, known_why, cur_ent)):
            if article is None:
                misses.append(f"{owner.text!r} had no article ({no_article})")
                continue
            names = _names(other, self.store.lookup(other), article.text)
            sentences = article.text.sentences_naming(names)
            if sentences:
                return GroundingVerdict(
                    check=KNOWN_HOP, passed=True,
                    reason=f"{other.text!r} is named in {article.where(self.cutoff)}",
                    evidence=[self.store.evidence(article.lookup, sentences)],
                )
            misses.append(f"{other.text!r} not in {article.where(self.cutoff)}")
        return GroundingVerdict(check=KNOWN_HOP, passed=False, reason="; ".join(misses))

    def _aab(self, answer: Entity, question: str) -> GroundingVerdict:
        article, why = self._article(answer)
        if article is None:
            return GroundingVerdict(
                check=KNOWN_HOP, passed=False,
                reason=f"nothing to check the known question against: {answer.text!r} had no "
                f"article on {self.cutoff} ({why})",
            )
        entities, words = self._questions.get(question) or self._analyse([question])[0]
        own = {_stem(w) for name in _own_names(answer, article.lookup) for w in name.split()}
        entities = [e for e in entities if not any(contains_answer(n, e) or contains_answer(e, n)
                                                   for n in _own_names(answer, article.lookup))]
        terms = [w for w in words if _stem(w) not in own]
        missing = [e for e in entities if not article.names(e)]
        if missing:
            named = ", ".join(repr(e) for e in missing)
            return GroundingVerdict(check=KNOWN_HOP, passed=False,
                                    reason=f"{named} not in {article.where(self.cutoff)}")
        found = [t for t in terms if _stem(t) in article.stems]
        if terms and len(found) < MIN_TERM_SHARE * len(terms):
            absent = ", ".join(t for t in terms if t not in found)
            return GroundingVerdict(
                check=KNOWN_HOP, passed=False,
                reason=f"only {len(found)} of {len(terms)} key terms of the known question in "
                f"{article.where(self.cutoff)}; missing: {absent}",
            )
        sentences = _best_sentences(article.text, entities, found)
        return GroundingVerdict(
            check=KNOWN_HOP, passed=True,
            reason=f"the known question's {len(entities)} named entities and {len(found)} of "
            f"{len(terms)} key terms are in {article.where(self.cutoff)}",
            evidence=[self.store.evidence(article.lookup, sentences)],
        )


def _aab_known_questions(candidate: Candidate) -> list[str]:
    if candidate.difficulty == "hard":
        return [q for sub in candidate.sub_items for q in _aab_known_questions(sub)]
    steps = candidate.intermediates
    return [steps.known_question] if steps is not None and steps.k_ent is None else []


def _own_names(entity: Entity, lookup: ArticleLookup | None) -> list[str]:
    names = [entity.text, *answer_aliases(entity)]
    if lookup is not None:
        names += [n for n in (lookup.title, lookup.redirect) if n]
    return list(dict.fromkeys(names))


def _names(entity: Entity, lookup: ArticleLookup | None, where: ArticleText) -> list[str]:
    """Every way `where` may name `entity`: its text, aliases, article title, redirect, and the
    labels of links to it."""
    names = _own_names(entity, lookup)
    return list(dict.fromkeys([*names, *where.link_labels(names)]))


def _best_sentences(text: ArticleText, entities: list[str], terms: list[str]) -> list[str]:
    """The (at most two) sentences that hold the most of the question's entities and terms."""
    stems = {_stem(t) for t in terms}

    def score(sentence: str) -> int:
        words = {_stem(w) for w in normalize_answer(sentence).split()}
        return 2 * sum(contains_answer(sentence, e) for e in entities) + len(words & stems)

    ranked = sorted(text.sentences, key=score, reverse=True)
    return [s for s in ranked[:2] if score(s) > 0]


def evidence_sentences(verdicts: Sequence[GroundingVerdict]) -> list[Evidence]:
    """All evidence of the verdicts, in order (what a critic or an annotator reads)."""
    return [evidence for verdict in verdicts for evidence in verdict.evidence]


def spacy_analyser(model_name: str) -> QuestionAnalyser:
    """Named entities and content words of questions, by the project's spaCy pipeline (loaded
    on the first call only: runs without AAB items never load it)."""
    from cuqa_builder.ner import EntityExtractor

    extractors: list[EntityExtractor] = []

    def analyse(questions: list[str]) -> list[tuple[list[str], list[str]]]:
        if not extractors:
            extractors.append(EntityExtractor(model_name))
        extractor = extractors[0]
        entities = extractor.for_texts(questions)
        words = extractor.content_words(questions)
        return [([e.text for e in found], terms)
                for found, terms in zip(entities, words, strict=True)]

    return analyse
