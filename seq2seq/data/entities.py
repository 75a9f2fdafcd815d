"""Names and numbers that a translation copies unchanged, split between training and testing.

A name or a number in the source usually appears in the same form in the translation: "Julia
Schmidt paid 48213" keeps "Julia", "Schmidt" and "48213". Two parts of the project use these
entities, and must never share one:

    seq2seq.data.augment        copy-teaching: training pairs whose names and numbers are
                                swapped for others (the *training* entities)
    seq2seq.data.entity_copy    the entity test: sentences built over the *held-out* ones

The split is a stable hash of the entity's key (a name casefolded, a number's digits alone): one
key in `HELD_OUT_BUCKETS` is held out. It is the same on every machine and Python version, and a
number is held out in all its forms ("19.99", "19,99" and "1999" share the key "1999").

Names come from seq2seq/data/names.tsv (given names and surnames of many languages, see its
header); numbers are drawn by shape: a year, a time, or digits with the separators kept.
"""

import hashlib
import random
import re
import unicodedata
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

NAMES_FILE = Path(__file__).with_name("names.tsv")
# Names of many alphabets, with their accents ("Siobhán", "Wiśniewski", "Nguyễn"): copy-teaching's
# data.augment_world_names; see its header
WORLD_NAMES_FILE = Path(__file__).with_name("names_world.tsv")
HELD_OUT_BUCKETS = 10  # one key in ten is held out for the entity test

# A number: digit runs joined by one separator each ("2015", "19.99", "3,5", "14:30",
# "555-0142"). A name: a capitalised word ("Julia"; not "I", "OK" or "McDonald"). A digit is
# what `\d` matches, a decimal digit of any script, as `str.isdecimal` tells (and int() reads):
# never `str.isdigit`, which takes superscripts and circled digits ("⁴", "⑦") for digits too.
NUMBER = re.compile(r"\d+(?:[.,:-]\d+)*")
NAME = re.compile(r"[^\W\d_][^\W\d_A-Z]+")
TIME = re.compile(r"(\d{1,2}):(\d\d)")
YEARS = range(1900, 2030)
# One number of each kind, as English writes it: integers of one to five digits, a year, times,
# decimals and prices, a phone-like number. A number is drawn like one of them (`draw_number`).
NUMBER_SHAPES = ("7", "18", "345", "48213", "1987", "9:45", "14:30", "3.5", "19.99", "555-0142")
DECIMAL_COMMA = frozenset({"de", "fr"})  # the languages that write 19.99 as 19,99
DECIMAL = re.compile(r"(\d+)\.(\d+)")
REPEATED_DIGIT = re.compile(r"(\d)\1")
MAX_DRAWS = 1000  # a shape with no held-out (or no training) value left gives up after this
# Codes copied whole: invoice and order numbers, licence plates, postcodes (British, Canadian,
# Polish, Dutch), product codes. In a shape "A" is a capital letter, "9" a digit, the rest itself.
CODE_SHAPES = (
    "INV-9999-99999",
    "ORD-999999",
    "AA-999-AA",
    "AA99 AAA",
    "A99 9AA",
    "A9A 9A9",
    "99-999",
    "9999 AA",
    "AAAAAAAA99",
    "AA-9999-A",
)
# The months, January first, as each language writes them inside a sentence (copy-teaching
# swaps them: seq2seq.data.augment)
MONTHS = {
    "en": ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December"),
    "fr": ("janvier", "février", "mars", "avril", "mai", "juin", "juillet", "août", "septembre",
           "octobre", "novembre", "décembre"),
    "de": ("Januar", "Februar", "März", "April", "Mai", "Juni", "Juli", "August", "September",
           "Oktober", "November", "Dezember"),
}  # fmt: skip
# E-mail addresses and URLs are made of a name at a domain reserved for examples (RFC 2606).
DOMAINS = ("example.com", "example.org", "example.net")
# Letters that NFKD does not take apart, as an address writes them
ASCII_LETTERS = str.maketrans(
    {"ł": "l", "ø": "o", "ß": "ss", "đ": "d", "ð": "d", "þ": "th", "æ": "ae", "ı": "i"}
)


def is_number(entity: str) -> bool:
    return NUMBER.fullmatch(entity) is not None


def is_name(entity: str) -> bool:
    return NAME.fullmatch(entity) is not None and entity[0].isupper()


def written_in(number: str, language: str) -> str:
    """`number`, as English writes it, as `language` writes it: a decimal point becomes a comma
    in French and German ("19.99" -> "19,99"); other numbers are written alike."""
    if language in DECIMAL_COMMA and (decimal := DECIMAL.fullmatch(number)) is not None:
        return f"{decimal[1]},{decimal[2]}"
    return number


def held_out(entity: str) -> bool:
    """Whether `entity` (a name or a number) belongs to the entity test, not to training."""
    key = re.sub(r"\D", "", entity) if is_number(entity) else entity.casefold()
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % HELD_OUT_BUCKETS == 0


@dataclass(frozen=True)
class Names:
    """The given names and surnames on one side of the split, each sorted."""

    given: tuple[str, ...]
    surnames: tuple[str, ...]

    @cached_property
    def surname_set(self) -> frozenset[str]:
        """`surnames` for lookups: copy-teaching asks of every name it swaps."""
        return frozenset(self.surnames)


def load_names(held: bool, path: Path = NAMES_FILE) -> Names:
    """The names of names.tsv (or `path`) that are held out (`held`) or that training may
    use."""
    given, surnames = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            continue
        name, kind = line.split("\t")
        if held_out(name) == held:
            (given if kind == "given" else surnames).append(name)
    return Names(tuple(sorted(given)), tuple(sorted(surnames)))


def _digits(rng: random.Random, like: str) -> str:
    """Random digits as many as `like` has; the first is not 0 unless `like`'s is."""
    first = rng.choice("0123456789" if like[0] == "0" or len(like) == 1 else "123456789")
    return first + "".join(rng.choice("0123456789") for _ in like[1:])


def _number_like(rng: random.Random, number: str) -> str:
    """A random number of the same shape as `number`: a year for a year (1900-2029), a valid
    time for a time ("9:05" -> "7:41", "14:30" -> "21:07"), else the same digit runs and
    separators with other digits ("19.99" -> "47.20", "555-0142" -> "318-0957")."""
    if (time := TIME.fullmatch(number)) is not None:
        hours = range(10, 24) if len(time[1]) == 2 and time[1][0] != "0" else range(10)
        hour = rng.choice(hours)
        return f"{hour:0{len(time[1])}d}:{rng.randrange(60):02d}"
    if number.isdecimal() and len(number) == 4 and int(number) in YEARS:
        return str(rng.choice(YEARS))
    return re.sub(r"\d+", lambda run: _digits(rng, run[0]), number)


def has_repeated_digit(number: str) -> bool:
    """Whether two equal digits stand side by side ("7714", "19.99"; not "12-21")."""
    return REPEATED_DIGIT.search(number) is not None


def draw_number(rng: random.Random, like: str, held: bool, *, repeated_digit: bool = False) -> str:
    """A random number shaped like `like` (see `_number_like`) on the `held` side of the split;
    with `repeated_digit`, one with two equal digits side by side where the shape has room for
    them (any run of two digits or more: "1999" or "19:00", but not "7")."""
    repeated_digit = repeated_digit and re.search(r"\d\d", like) is not None
    for _ in range(MAX_DRAWS):
        number = _number_like(rng, like)
        if held_out(number) == held and (has_repeated_digit(number) or not repeated_digit):
            return number
    raise ValueError(f"no number shaped like {like!r} on that side of the split")


def draw_code(rng: random.Random, held: bool) -> str:
    """A random code of one of `CODE_SHAPES` on the `held` side of the split ("INV-2025-00417",
    "SW1A 1AA", "BRETAGNE29")."""
    letters, digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789"
    for _ in range(MAX_DRAWS):
        shape = rng.choice(CODE_SHAPES)
        chars = {"A": letters, "9": digits}
        code = "".join(rng.choice(chars[c]) if c in chars else c for c in shape)
        if held_out(code) == held:
            return code
    raise ValueError("no code on that side of the split")


def contact(rng: random.Random, given: str, surname: str) -> str:
    """An e-mail address or a URL made of a name ("ana.wisniewska@example.org",
    "https://www.example.com/ana-wisniewska"), in ASCII letters."""
    name = unicodedata.normalize("NFKD", f"{given} {surname}".lower().translate(ASCII_LETTERS))
    words = re.sub(r"[^a-z ]", "", name.encode("ascii", "ignore").decode()).split()
    domain = rng.choice(DOMAINS)
    if rng.random() < 0.5:
        return f"{'.'.join(words)}@{domain}"
    return f"https://www.{domain}/{'-'.join(words)}"
