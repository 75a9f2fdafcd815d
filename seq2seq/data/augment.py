"""Copy-teaching: extra training pairs whose names and numbers are swapped for others.

A corpus of everyday sentences names few people ("Tom", "Mary") and holds few numbers, so a
model trained on it alone translates names as if they were words and changes digits ('2015' ->
'205'). Copy-teaching shows it many more. A training pair whose source and target share a name or
a number in the same form,

    Tom was born in 1990.   Tom est né en 1990.

gets extra pairs, `rate` of them on average, with each shared entity replaced by a random one of
the same kind, the same on both sides:

    Ayodele was born in 1953.   Ayodele est né en 1953.

A corpus of everyday sentences shares hardly any surname, so a third of the given names put in
come with one, where the pair has none ("Tom" -> "Ayodele Berg").

Numbers are much rarer than names in everyday sentences, so a pair that shares a number may get
more: `number_rate` pairs on average (the larger of the two rates when it shares a name too).
And a corpus holds few kinds of them (ages and years, hardly a price or a phone number), so half
the numbers put in are of the shape they replace, the other half of any kind the entity test
asks for (`NUMBER_SHAPES`), each side written as its language writes it:

    I am 30 years old.          J'ai 30 ans.
    I am 48.75 years old.       J'ai 48,75 ans.

A model copies a digit that repeats ("7714", "19.99") worse than others: it must count equal
pieces. With `repeated_digits` set, that share of the numbers put in are drawn with two equal
digits side by side, where their shape has room for them (left at 0, only those drawn so by
chance are).

A model taught to copy capitalised words copies a month's name too ("on 2 August" stays "le 2
August" in French), and everyday sentences name few months (182 of Tatoeba's English-French
training pairs name the same month on both sides). With `month_rate` set, a pair that does gets
that many extra pairs on average with another month, each side in its own language (`MONTHS`):

    His birthday is August 21st.    Son anniversaire est le 21 août.
    His birthday is March 21st.     Son anniversaire est le 21 mars.

The replacements are training entities (`seq2seq.data.entities`): the entity test never sees
them. The random draws come from one seeded generator, so the same corpus, rates and seed give
the same pairs. Only the training split is augmented, and the tokenizer learns its vocabulary
without these pairs (see `seq2seq.data.prepare`).
"""

import random
import re
from dataclasses import dataclass

from seq2seq.data.entities import (
    MAX_DRAWS,
    MONTHS,
    NUMBER,
    NUMBER_SHAPES,
    WORLD_NAMES_FILE,
    Names,
    contact,
    draw_code,
    draw_number,
    is_name,
    load_names,
    written_in,
)

# What may be an entity: a number, or a word (of which the capitalised ones are names).
TOKEN = re.compile(rf"{NUMBER.pattern}|[^\W\d_]+")
# The copy-teaching a prepared folder records (settings.augment_version): 1, every number
# replaced by one of its shape; 2, half of them by one of any shape, written per language;
# 3, the tokenizer learnt from the corpus's own pairs, without copy-teaching's, and a third of
# the given names put in followed by a surname.
AUGMENT_VERSION = 3
# A prepared folder's copy-teaching settings (each recorded when it is not 0), as
# `seq2seq prepare` and a configuration's `data` section name them.
AUGMENT_SETTINGS = (
    "augment_entities",
    "augment_numbers",
    "augment_repeated_digits",
    "augment_world_names",
    "augment_codes",
    "augment_contacts",
    "augment_months",
    "concat_share",  # seq2seq.data.concatenate
)
# The settings that only change what copy-teaching puts in: nothing without it.
COPY_TEACHING_SHARES = (
    "augment_repeated_digits",
    "augment_world_names",
    "augment_codes",
    "augment_contacts",
    "augment_months",
)
SAME_SHAPE = 0.5  # the share of the numbers put in that have the shape of the one they replace
# The share of the given names put in that come with a surname (a full name): everyday sentences
# share hardly any surname, so without them a model would never see one to copy.
FULL_NAME = 1 / 3


def entities(line: str) -> list[str]:
    """The names and numbers of `line`, in order ("Tom, 19.99 €" -> ["Tom", "19.99"])."""
    return [token for token in TOKEN.findall(line) if token[0].isdecimal() or is_name(token)]


def shared_entities(src: str, tgt: str) -> list[str]:
    """The names and numbers that appear in the same form on both sides, in source order."""
    in_target = set(entities(tgt))
    return list(dict.fromkeys(e for e in entities(src) if e in in_target))


def _capitalised(word: str) -> str:
    """`word` with a capital first ("octobre" -> "Octobre")."""
    return word[:1].upper() + word[1:]


# Each language's months by the words that name them, as MONTHS writes them or with a capital
MONTH_OF_WORD = {
    language: {
        form: month for month, name in enumerate(names) for form in (name, _capitalised(name))
    }
    for language, names in MONTHS.items()
}


def _cased_like(word: str, like: str) -> str:
    """`word` with a capital first where `like` has one ("mars", "Octobre" -> "Mars")."""
    return _capitalised(word) if like[0].isupper() else word


def _month(word: str, language: str) -> int | None:
    """The month (from 0) that `word` names in `language`, as `MONTHS` writes it or with a
    capital first ("août", "Août"); None for any other word."""
    return MONTH_OF_WORD[language].get(word)


def shared_months(src: str, tgt: str, languages: tuple[str, str]) -> list[tuple[str, str, int]]:
    """The months that both sides name, as (source word, target word, month from 0): "August"
    and "août" in "His birthday is August 21st." / "Son anniversaire est le 21 août."."""
    in_target: dict[int, str] = {}
    for word in TOKEN.findall(tgt):
        if (month := _month(word, languages[1])) is not None:
            in_target.setdefault(month, word)
    found = [
        (word, in_target[month], month)
        for word in TOKEN.findall(src)
        if (month := _month(word, languages[0])) in in_target
    ]
    return list(dict.fromkeys(found))


def replace(line: str, replacements: dict[str, str]) -> str:
    """`line` with every whole entity that is a key of `replacements` replaced."""
    return TOKEN.sub(lambda token: replacements.get(token[0], token[0]), line)


@dataclass
class AugmentReport:
    """What augmentation did to the training split (recorded in the manifest)."""

    pairs_with_entities: int = 0  # training pairs sharing a name or a number
    pairs_added: int = 0
    pairs_with_numbers: int = 0  # of pairs_with_entities, those sharing a number
    pairs_added_for_numbers: int = 0  # of pairs_added, those for the pairs sharing a number
    pairs_with_months: int = 0  # training pairs naming the same month on both sides

    def to_dict(self) -> dict[str, int]:
        """The report as the manifest records it (`pairs_with_months` only when not 0)."""
        return {
            key: value for key, value in vars(self).items() if value or key != "pairs_with_months"
        }


class EntityAugmenter:
    """Adds copy-teaching pairs to each pair that shares an entity: `rate` of them on average, or
    `number_rate` for each pair that shares a number (0: `rate`; a pair sharing a name and a
    number gets the larger). A rate of 2.5 gives two pairs, and a third with probability 0.5.
    `languages`: the (source, target) languages, whose way of writing numbers is kept;
    `repeated_digits`: the share of the numbers put in that have a digit repeated; `months`: the
    pairs added for each pair naming the same month on both sides (the largest rate wins)."""

    def __init__(
        self,
        rate: float,
        seed: int,
        *,
        languages: tuple[str, str],
        names: Names | None = None,
        number_rate: float = 0.0,
        repeated_digits: float = 0.0,
        world_names: float = 0.0,
        codes: float = 0.0,
        contacts: float = 0.0,
        months: float = 0.0,
    ) -> None:
        self.rate = rate
        self.number_rate = number_rate or rate
        self.repeated_digits = repeated_digits
        self.month_rate = months
        self.shares = {"world": world_names, "codes": codes, "contacts": contacts}
        self.languages = languages
        self.rng = random.Random(seed)
        self.names = names or load_names(held=False)
        self.world = load_names(held=False, path=WORLD_NAMES_FILE) if world_names else self.names
        self.report = AugmentReport()

    def _chance(self, kind: str) -> bool:
        """True `self.shares[kind]` of the time; no draw is spent on a share of 0, so the
        draws are those of a copy-teaching without it."""
        return bool(self.shares[kind]) and self.rng.random() < self.shares[kind]

    def _draw(self, entity: str, taken: set[str], full_names: bool) -> tuple[str, str]:
        """A training entity of the same kind as `entity` (for a number, half the time of any
        shape; for a given name, with `full_names` sometimes a full name), sharing no word with
        `taken`, as the source and the target write it (`entity` itself when none is left)."""
        for _ in range(MAX_DRAWS):
            if entity[0].isdecimal():
                new = self._draw_number(entity)
            else:
                name = self._draw_name(entity, full_names)
                new = name, name
            if taken.isdisjoint(new[0].split()):
                return new
        return entity, entity

    def _draw_name(self, name: str, full_names: bool) -> str:
        """A training name for `name`: a surname for a surname; for a given name, a given name,
        with `full_names` followed by a surname `FULL_NAME` of the time. A share of them come
        from names_world.tsv (`world_names`), and a share are e-mail addresses or URLs made of
        a name (`contacts`)."""
        names = self.world if self._chance("world") else self.names
        if self._chance("contacts"):
            return contact(self.rng, self.rng.choice(names.given), self.rng.choice(names.surnames))
        if name in self.names.surname_set:
            return self.rng.choice(names.surnames)
        given = self.rng.choice(names.given)
        if full_names and self.rng.random() < FULL_NAME:
            return f"{given} {self.rng.choice(names.surnames)}"
        return given

    def _draw_number(self, number: str) -> tuple[str, str]:
        """A training number for `number`: a code (`codes` of the time), or a number of its
        shape written as it is, or of any shape and written as each language writes it."""
        if self._chance("codes"):
            code = draw_code(self.rng, held=False)
            return code, code
        if self.rng.random() < SAME_SHAPE:
            new = self._training_number(number)
            return new, new
        new = self._training_number(self.rng.choice(NUMBER_SHAPES))
        return written_in(new, self.languages[0]), written_in(new, self.languages[1])

    def _training_number(self, like: str) -> str:
        """A training number shaped like `like`, `repeated_digits` of the time with a digit
        repeated (no draw is spent on that choice when `repeated_digits` is 0)."""
        repeated = bool(self.repeated_digits) and self.rng.random() < self.repeated_digits
        return draw_number(self.rng, like, held=False, repeated_digit=repeated)

    def substitute(
        self, src: str, tgt: str, shared: list[str], months: list[tuple[str, str, int]]
    ) -> tuple[str, str]:
        """The pair with each of its `shared` entities replaced by a different random one, and
        each of its `months` by another month on both sides. Given names become full names only
        where the pair has no surname ("Tom" -> "Ana Berg", but not "Tom Smith" -> "Ana Berg
        Okafor")."""
        full_names = self.names.surname_set.isdisjoint(shared)
        in_src: dict[str, str] = {}
        in_tgt: dict[str, str] = {}
        taken = set(shared)
        for entity in shared:
            in_src[entity], in_tgt[entity] = self._draw(entity, taken, full_names)
            taken.update(in_src[entity].split())
        for src_word, tgt_word, month in months:
            other = (month + self.rng.randrange(1, 12)) % 12
            in_src[src_word] = _cased_like(MONTHS[self.languages[0]][other], src_word)
            in_tgt[tgt_word] = _cased_like(MONTHS[self.languages[1]][other], tgt_word)
        return replace(src, in_src), replace(tgt, in_tgt)

    def __call__(self, src: str, tgt: str) -> list[tuple[str, str]]:
        """The extra pairs for the training pair (`src`, `tgt`), often none."""
        months = shared_months(src, tgt, self.languages) if self.month_rate else []
        named = {word for src_word, tgt_word, _ in months for word in (src_word, tgt_word)}
        shared = [entity for entity in shared_entities(src, tgt) if entity not in named]
        if not shared and not months:
            return []
        rates = [self.number_rate if entity[0].isdecimal() else self.rate for entity in shared]
        rate = max(rates + [self.month_rate] * bool(months))
        copies = int(rate) + int(self.rng.random() < rate - int(rate))
        self._count(shared, months, copies)
        return [self.substitute(src, tgt, shared, months) for _ in range(copies)]

    def _count(self, shared: list[str], months: list[tuple[str, str, int]], copies: int) -> None:
        """Record a pair's `copies` in the report."""
        self.report.pairs_added += copies
        self.report.pairs_with_entities += bool(shared)
        self.report.pairs_with_months += bool(months)
        if any(entity[0].isdecimal() for entity in shared):
            self.report.pairs_with_numbers += 1
            self.report.pairs_added_for_numbers += copies
