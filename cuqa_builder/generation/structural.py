"""A description of the bridge made from the event sentence's parse, for models too small to
write one (the embedded 1.5B model names the bridge or drops the date in most of its tries).

The event's first sentence is kept as it is, minus the bridge, in one of three shapes:
- a place in a prepositional phrase of the main clause: "A business jet crashes in Tver Oblast,
  Russia, killing ..." -> "the place where a business jet crashes, killing ..., in August 2023";
- the subject of the main verb: "The San Antonio Spurs select ..." -> "the organisation that
  selects ...";
- the object of a verb, described by that verb in the passive: "Bernardo Arévalo ... wins the
  runoff in Guatemala, defeating Sandra Torres" -> "the person defeated by Bernardo Arévalo ...
  in Guatemala"; the object of an infinitive its subject only agreed or planned to do keeps the
  relative clause ("the company that Nippon Steel agrees to buy for ...").
Anything else gives no description, and so does a sentence that would not read as written: a
later sentence (it leans on the first: "Tadej Pogačar finishes second"), a verb the tagger
found in a name ("The San Antonio Spurs select" parsed with "Spurs" as the verb), a bridge
coordinated with another name (the description would drop or misplace it), a pronoun with
nothing to refer to ("the country where authorities call it the largest evacuation"), a list
of events ("Matchday 4: ...; ..."), a place in a clause that opens the sentence or whose region
would stay behind ("near Toropets, Tver Oblast, ..."). A coordinated clause with a subject of
its own is left out ("..., and his teammate finishes second"). The words are the event's own,
so the description adds nothing else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cuqa_builder.ner import Token

# Prepositions after which the bridge is where the event happened.
_PLACE_PREPOSITIONS = frozenset({"in", "at", "on", "near", "across", "inside", "off", "over"})
_SUBJECT, _OBJECT = frozenset({"nsubj", "nsubjpass"}), frozenset({"dobj"})
_FINITE = frozenset({"VBZ", "VBP", "VBD"})
# Where the clause that holds the bridge may hang from the sentence's root: a relative clause, a
# noun's modifier or reported speech is about something else ("a dinner hosted at the White
# House" is no place where the main event happened).
_MAIN_CLAUSE = frozenset({"ROOT", "conj", "advcl", "xcomp", "prep", "pobj", "nsubj",
                          "nsubjpass", "dobj", "appos", "compound"})
_SUBJECT_VERB = frozenset({"ROOT", "conj", "ccomp"})  # "Roscosmos says [the lander] has crashed"
_AUXILIARIES = frozenset({"aux", "auxpass", "neg"})
_PRESENT = frozenset({"VBZ", "VBP"})
_CLAUSE_HEADS = frozenset({"ROOT", "conj", "ccomp", "advcl", "relcl"})
# A pronoun the description may keep: one that can stand for the described bridge itself.
_OWN_PRONOUNS = {"person": frozenset({"he", "him", "she", "her"}), "": frozenset({"it"})}
# A pronoun and the tags of the nouns it can refer to; "this", "these" stand for nothing named.
_ANTECEDENT_TAGS = {
    "it": frozenset({"NN", "NNP"}), "they": frozenset({"NNS", "NNPS"}),
    "them": frozenset({"NNS", "NNPS"}), "he": frozenset({"NNP"}), "him": frozenset({"NNP"}),
    "she": frozenset({"NNP"}), "her": frozenset({"NNP"}), "this": frozenset(),
    "these": frozenset(), "those": frozenset(),
}
_DEMONSTRATIVES = frozenset({"this", "that", "these", "those"})  # as determiners: "that region"
_PAST_PARTICIPLES = {
    "arise": "arisen", "be": "been", "bear": "borne", "beat": "beaten", "become": "become",
    "begin": "begun", "bend": "bent", "bid": "bid", "bind": "bound", "blow": "blown",
    "break": "broken", "breed": "bred", "bring": "brought", "broadcast": "broadcast",
    "build": "built", "buy": "bought", "catch": "caught", "choose": "chosen", "come": "come",
    "cut": "cut", "deal": "dealt", "dig": "dug", "do": "done", "draw": "drawn",
    "drive": "driven", "eat": "eaten", "fall": "fallen", "feed": "fed", "feel": "felt",
    "fight": "fought", "find": "found", "flee": "fled", "fly": "flown", "forbid": "forbidden",
    "forecast": "forecast", "forget": "forgotten", "freeze": "frozen", "get": "got",
    "give": "given", "go": "gone", "grow": "grown", "hang": "hung", "have": "had",
    "hear": "heard", "hide": "hidden", "hit": "hit", "hold": "held", "hurt": "hurt",
    "keep": "kept", "know": "known", "lay": "laid", "lead": "led", "leave": "left",
    "lend": "lent", "let": "let", "light": "lit", "lose": "lost", "make": "made",
    "mean": "meant", "meet": "met", "mislead": "misled", "overthrow": "overthrown",
    "oversee": "overseen", "overtake": "overtaken", "pay": "paid", "put": "put", "quit": "quit",
    "read": "read", "rebuild": "rebuilt", "ride": "ridden", "rise": "risen", "run": "run",
    "say": "said", "see": "seen", "seek": "sought", "sell": "sold", "send": "sent", "set": "set",
    "shake": "shaken", "shed": "shed", "shoot": "shot", "show": "shown", "shut": "shut",
    "sink": "sunk", "slay": "slain", "speak": "spoken", "spend": "spent", "split": "split",
    "spread": "spread", "stand": "stood", "steal": "stolen", "strike": "struck",
    "swear": "sworn", "sweep": "swept", "take": "taken", "teach": "taught", "tear": "torn",
    "tell": "told", "think": "thought", "throw": "thrown", "undertake": "undertaken",
    "understand": "understood", "upset": "upset", "wear": "worn", "win": "won",
    "withdraw": "withdrawn", "write": "written",
}
# Where the simple past differs from the past participle (or the participle is regular).
_PAST_TENSE = {
    "arise": "arose", "bear": "bore", "beat": "beat", "become": "became", "begin": "began",
    "blow": "blew", "break": "broke", "choose": "chose", "come": "came", "do": "did",
    "draw": "drew", "drive": "drove", "eat": "ate", "fall": "fell", "fly": "flew",
    "forbid": "forbade", "forget": "forgot", "freeze": "froze", "give": "gave", "go": "went",
    "grow": "grew", "hide": "hid", "know": "knew", "overthrow": "overthrew",
    "oversee": "oversaw", "overtake": "overtook", "ride": "rode", "rise": "rose", "run": "ran",
    "see": "saw", "shake": "shook", "show": "showed", "sink": "sank", "slay": "slew",
    "speak": "spoke", "steal": "stole", "swear": "swore", "take": "took", "tear": "tore",
    "throw": "threw", "undertake": "undertook", "wear": "wore", "withdraw": "withdrew",
    "write": "wrote",
}
# Verbs of two syllables stressed on the last, which double their final consonant.
_DOUBLING = frozenset({"admit", "commit", "compel", "control", "expel", "omit", "patrol",
                       "permit", "prefer", "propel", "refer", "regret", "submit", "transfer",
                       "acquit", "equip", "occur"})


def plural(noun: str) -> bool:
    """Whether a kind ("islands", "political party") is plural: its last word ends in -s, not
    in -ss, -us or -is."""
    last = noun.split()[-1].lower() if noun.split() else ""
    return len(last) > 3 and last.endswith("s") and not last.endswith(("ss", "us", "is"))


def past_participle(lemma: str) -> str:
    """"defeat" -> "defeated", "buy" -> "bought", "ban" -> "banned"."""
    word = lemma.lower()
    if word in _PAST_PARTICIPLES:
        return _PAST_PARTICIPLES[word]
    if word.endswith("e"):
        return word + "d"
    if re.search(r"[^aeiou]y$", word):
        return word[:-1] + "ied"
    if word in _DOUBLING or re.fullmatch(r"[^aeiou]*[aeiou][^aeiouwxy]", word):
        return word + word[-1] + "ed"
    return word + "ed"


def _past_tense(verb: Token, plural_subject: bool | None = None) -> str:
    """"strikes" -> "struck", "rises" -> "rose", "is elected" -> "was elected": the event
    happened before anyone asks about it. `plural_subject`: the number of the described bridge
    where it is the verb's subject ("the islands that were ..."), else the verb's own."""
    word, lemma = verb.text.lower(), (verb.lemma or verb.text).lower()
    if lemma == "be" or word in ("is", "are", "am"):
        plural_form = word == "are" if plural_subject is None else plural_subject
        past = "were" if plural_form else "was"
    elif lemma in _PAST_TENSE:
        past = _PAST_TENSE[lemma]
    else:
        past = past_participle(lemma)
    return past[:1].upper() + past[1:] if verb.text[:1].isupper() else past


def _present(tokens: list[Token], token: Token) -> bool:
    """A verb in the present that heads a clause: "strikes", "destroy" (the tagger calls some
    present verbs "VB"), not an infinitive or a verb after a modal."""
    if token.tag in _PRESENT:
        return True
    if token.dep == "ROOT" and token.tag == "NNS":
        return True  # a news sentence has a verb: "A business jet crashes in ..." tagged a noun
    return token.tag == "VB" and token.dep in _CLAUSE_HEADS and not _children(
        tokens, token, frozenset({"aux", "auxpass"}))


def _in_the_past(tokens: list[Token], kept: list[Token], changed: dict[int, str],
                 first: Token | None = None, plural_subject: bool | None = None) -> None:
    """Every present verb heading a clause of the description put in the past; `first`, the
    verb the bridge is the subject of, agreeing with it."""
    for token in kept:
        if _present(tokens, token):
            changed[token.index] = _past_tense(
                token, plural_subject if token is first else None)


def _subtree(tokens: list[Token], root: int) -> set[int]:
    found = {root}
    grew = True
    while grew:
        grew = False
        for token in tokens:
            if token.index not in found and token.head in found and token.head != token.index:
                found.add(token.index)
                grew = True
    return found


def _children(tokens: list[Token], head: Token, deps: frozenset[str]) -> list[Token]:
    return [t for t in tokens if t.head == head.index and t.index != head.index and t.dep in deps]


def _in_main_clause(tokens: list[Token], token: Token) -> bool:
    """Whether every link from `token` up to its sentence's root is one of `_MAIN_CLAUSE`, and
    no adverbial clause on the way opens the sentence ("Making an appearance in Singapore, ...":
    the place is the clause's, not the event's)."""
    while token.head != token.index:
        if token.dep not in _MAIN_CLAUSE or token.dep == "advcl" and token.index < token.head:
            return False
        token = tokens[token.head]
    return True


def _render(tokens: list[Token], changed: dict[int, str]) -> str:
    """The kept tokens as text; where the cut left two words that were not neighbours, a
    space between them even if the first was followed by punctuation."""
    parts: list[str] = []
    for token, following in zip(tokens, [*tokens[1:], None], strict=False):
        space = token.space
        if following is not None and following.index != token.index + 1 and not space:
            space = " "
        parts.append(changed.get(token.index, token.text) + space)
    text = "".join(parts).strip()
    text = re.sub(r"\s+([,.;:])", r"\1", text)
    text = re.sub(r"^[,;:]\s*|,\s*(?=[,.;:]|$)", "", text)  # a comma left hanging by the cut
    return text.rstrip(" .;:,")


def _lower_start(kept: list[Token], sentence: list[Token], changed: dict[int, str]) -> None:
    """The sentence's first word in lower case where it opens the description, unless it is
    part of a name ("Wildfires on Maui ..." -> "wildfires", "Spain beats ..." stays)."""
    first = kept[0] if kept else None
    text = changed.get(first.index, first.text) if first is not None else ""
    if first is not None and first.index == sentence[0].index and not first.name and (
            text[1:].islower() or len(text) == 1):  # "OPEC+" is no word to lower
        changed[first.index] = text[:1].lower() + text[1:]


@dataclass(frozen=True)
class _Clause:
    opener: str  # "where", "that", or "" for a participle phrase
    words: str
    tokens: list[Token]  # the sentence's tokens it keeps


def _clause(opener: str, kept: list[Token], sentence: list[Token],
            first: Token | None = None, plural_subject: bool | None = None) -> _Clause:
    """The clause's words in the past (`first`: the verb whose subject the bridge is)."""
    changed: dict[int, str] = {}
    _in_the_past(sentence, kept, changed, first, plural_subject)
    _lower_start(kept, sentence, changed)
    return _Clause(opener, _render(kept, changed), kept)


def _place(tokens: list[Token], root: Token, sentence: list[Token],
           inside: set[int]) -> _Clause | None:
    head = tokens[root.head]
    if not (root.dep == "pobj" and head.dep == "prep"
            and head.text.lower() in _PLACE_PREPOSITIONS and _in_main_clause(tokens, head)):
        return None
    cut = _subtree(tokens, head.index) | inside
    main = next(t for t in sentence if t.head == t.index)
    if max(cut) < main.index and not any(
            subject.index not in cut for subject in _children(tokens, main, _SUBJECT)):
        return None  # "at Liverpool Crown Court, Axel Rudakubana, 18, pleads": the parse
        # hung the event's subject on the place, and cutting it would leave no one who
    after = max(cut) + 1
    if after + 1 < len(tokens) and tokens[after].text == "," and tokens[after + 1].tag in (
            "NNP", "NNPS") and tokens[after + 1].index not in cut:
        return None  # "near Toropets, Tver Oblast, ...": the place's region would stay behind
    if (tokens[head.head].dep in _SUBJECT and after < len(tokens)
            and tokens[after].text == "," and "," in {tokens[i].text for i in cut}):
        cut.add(after)  # "The conference in Dubai, UAE, ends": the comma closed the place
    kept = [t for t in sentence if t.index not in cut]
    return _clause("where", kept, sentence) if kept else None


def _subject(tokens: list[Token], root: Token, sentence: list[Token], inside: set[int],
             kind: str) -> _Clause | None:
    """"X of Y is elected Z, and W says ..." -> "that is elected Z": the verb with its
    auxiliaries and what follows it, minus a coordinated clause with a subject of its own."""
    verb = tokens[root.head]
    if root.dep not in _SUBJECT or not verb.tag.startswith("VB") or not _reported_or_main(
            tokens, verb):
        return None
    auxiliaries = _children(tokens, verb, _AUXILIARIES)
    if any(t.text.lower() == "to" for t in auxiliaries):
        return None  # an infinitive's subject ("helping Russia to discourage ...")
    clause = _subtree(tokens, verb.index) - _subtree(tokens, root.index) - inside
    for other in _children(tokens, verb, frozenset({"conj"})):
        if _children(tokens, other, _SUBJECT):  # "..., and his teammate passes ..."
            start = min(_subtree(tokens, other.index))
            clause -= _subtree(tokens, other.index) | {
                t.index for t in _children(tokens, verb, frozenset({"cc", "punct"}))
                if start - 3 <= t.index < start}
    first = min([verb, *auxiliaries], key=lambda t: t.index)
    kept = [t for t in sentence if t.index in clause and t.index >= first.index]
    return _clause("that", kept, sentence, first, plural(kind))


def _reported_or_main(tokens: list[Token], verb: Token) -> bool:
    """The main verb, one coordinated with it, or what it reports ("Roscosmos says [the
    lander] has crashed"); not a verb inside a modifier ("demanding that Israel end ...")."""
    while verb.head != verb.index:
        if verb.dep not in _SUBJECT_VERB:
            return False
        verb = tokens[verb.head]
    return True


def _object(tokens: list[Token], root: Token, sentence: list[Token],
            inside: set[int]) -> _Clause | None:
    verb = tokens[root.head]
    if root.dep not in _OBJECT or not verb.tag.startswith("VB"):
        return None
    if verb.dep == "xcomp":  # agreed, planned: the relative clause keeps what was only intended
        governor = tokens[verb.head]
        if governor.tag not in _FINITE or not _children(tokens, governor, _SUBJECT):
            return None
        cut = _subtree(tokens, root.index) | inside
        clause = _subtree(tokens, governor.index)
        return _clause("that", [t for t in sentence if t.index in clause and t.index not in cut],
                       sentence)
    return _passive(tokens, root, verb, sentence, inside)


def _passive(tokens: list[Token], root: Token, verb: Token, sentence: list[Token],
             inside: set[int]) -> _Clause | None:
    """"X defeats Y in Z" -> "defeated by X in Z": the verb's subject (or, for a participle
    or an infinitive of purpose, its clause's subject) after "by", then the verb's other words
    and, for such an adjunct, the places and times of its clause."""
    clause_head = verb
    if verb.tag not in _FINITE:
        if verb.dep != "advcl" or verb.tag not in ("VBG", "VB"):
            return None
        clause_head = tokens[verb.head]
    if not _in_main_clause(tokens, clause_head):
        return None
    subjects = _children(tokens, clause_head, frozenset({"nsubj"}))
    others = [t for t in _children(tokens, verb, frozenset({"dobj", "dative", "neg", "nsubj",
                                                            "nsubjpass", "auxpass"}))
              if t.index != root.index and t not in subjects]
    if len(subjects) != 1 or others:
        return None  # no agent to name, or a second object, a negation, a passive already
    agent_part = _subtree(tokens, subjects[0].index)
    dropped = _subtree(tokens, root.index) | inside | agent_part | {verb.index}
    for t in _children(tokens, verb, frozenset({"conj", "cc", "aux", "mark"})):
        dropped |= _subtree(tokens, t.index)  # another verb of the subject, "to", "as"
    rest = [t for t in sentence if t.index in _subtree(tokens, verb.index) - dropped]
    if any(t.index < verb.index and t.dep != "punct" for t in rest):
        return None  # words before the verb ("On Monday, ...") would land after the agent
    rest = [t for t in rest if t.index > verb.index]
    places: list[Token] = []
    if clause_head is not verb:  # where and when its clause happened: "in Guatemala"
        for prep in _children(tokens, clause_head, frozenset({"prep"})):
            if prep.index < verb.index:
                places += [t for t in sentence if t.index in _subtree(tokens, prep.index)]
    agent = [t for t in sentence if t.index in agent_part]
    changed: dict[int, str] = {}
    _lower_start(agent, sentence, changed)
    words = " ".join(filter(None, (past_participle(verb.lemma or verb.text), "by",
                                   _render(agent, changed), _render(rest, {}),
                                   _render(places, {}))))
    return _Clause("", words, agent + rest + places)


def _coordinated(tokens: list[Token], root: Token, inside: set[int]) -> bool:
    """"Luisa González ... and Daniel Noboa advance": the bridge is one of several."""
    def joined(token: Token) -> bool:  # by "and", "or": "Hoylake, England" is one place
        return any(t.dep == "cc" and t.head == token.head for t in tokens) or any(
            t.dep == "cc" and t.head in inside for t in tokens)

    return (root.dep == "conj" and joined(root)) or any(
        t.dep == "conj" and t.head in inside and joined(t) for t in tokens
        if t.index not in inside)


def _misparsed(sentence: list[Token], inside: set[int]) -> bool:
    """A verb with a capital inside the sentence: a word of a name ("The San Antonio Spurs
    select ..." tagged "Spurs" as the verb and "select" as an adjective); or a bridge whose
    words the parse split between two heads ("Indigenous Voice [to Parliament]")."""
    roots = [i for i in inside if sentence and (tokens_head := _head_of(sentence, i)) is not None
             and tokens_head not in inside]
    return len(roots) > 1 or any(
        t.tag.startswith("VB") and t.text[:1].isupper() and t.index != sentence[0].index
        for t in sentence)


def _head_of(sentence: list[Token], index: int) -> int | None:
    token = next((t for t in sentence if t.index == index), None)
    return None if token is None or token.head == token.index else token.head


def _stray_reference(kept: list[Token], opener: str, kind: str) -> bool:
    """A pronoun or "that region" with nothing to refer to in the description ("where
    authorities call it ...": no singular noun before "it"). As the bridge is the subject, a
    pronoun may stand for it ("that says it will ...")."""
    own = _OWN_PRONOUNS["person" if kind == "person" else ""] if opener == "that" else frozenset()
    for position, token in enumerate(kept):
        word = token.text.lower()
        if token.tag == "DT" and word in _DEMONSTRATIVES:
            return True
        if token.tag != "PRP" or word in own or word not in _ANTECEDENT_TAGS:
            continue
        if not any(t.tag in _ANTECEDENT_TAGS[word] for t in kept[:position]):
            return True
    return False


def describe_from_parse(tokens: list[Token], start: int, end: int, kind: str,
                        when: str) -> str | None:
    """The bridge at characters `start`-`end` of the parsed text described by its sentence;
    None when its role is none of the three or the sentence would not read as written."""
    span = [t for t in tokens if start <= t.start < end]
    if not span:
        return None
    inside = {t.index for t in span}
    root = next((t for t in span if t.head not in inside or t.head == t.index), span[0])
    sentence = [t for t in tokens if t.sentence == root.sentence]
    if (root.sentence != 0 or _misparsed(sentence, inside)
            or _coordinated(tokens, root, inside)):
        return None
    clause = (_place(tokens, root, sentence, inside)
              or _subject(tokens, root, sentence, inside, kind)
              or _object(tokens, root, sentence, inside))
    if (clause is None or not clause.words or re.search(r";|:\s", clause.words)
            or _stray_reference(clause.tokens, clause.opener, kind)):
        return None  # none, a list of events ("matchday 4: ...; ..."), or a stray pronoun
    opener = "who" if clause.opener == "that" and kind == "person" else clause.opener
    return " ".join(filter(None, ("the", kind, opener, clause.words, "in", when)))
