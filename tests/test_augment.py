"""Copy-teaching (seq2seq.data.augment): which entities it finds and swaps."""

import random
import re
from pathlib import Path

import pytest

from seq2seq.config_file import load_config
from seq2seq.data.augment import AUGMENT_SETTINGS, EntityAugmenter, entities
from seq2seq.data.concatenate import Concatenator
from seq2seq.data.corpora import UserFiles
from seq2seq.data.entities import (
    CODE_SHAPES,
    MONTHS,
    WORLD_NAMES_FILE,
    contact,
    draw_code,
    held_out,
    load_names,
)
from seq2seq.data.prepare import prepare
from seq2seq.data.prepared_corpus import PreparedData
from seq2seq.errors import UserError
from seq2seq.files import read_lines
from seq2seq.serving.access import read_keys

EN_FR = ("en", "fr")


def test_a_digit_is_a_decimal_digit_everywhere(tmp_path: Path) -> None:
    """Superscript and circled digits (footnote marks) are no numbers: `str.isdigit` took them
    for digits where `\\d` does not, and copy-teaching failed on a pair sharing one."""
    assert entities("see note ⁴ and ⑦ of 1990, or ٤") == ["1990", "٤"]
    augment = EntityAugmenter(2.0, seed=1, languages=EN_FR)
    assert augment("See note ⁴ in chapter ⑦.", "Voir la note ⁴ du chapitre ⑦.") == []
    pairs = augment("Read note ⁴ of 1990.", "Lis la note ⁴ de 1990.")
    assert pairs and all("⁴" in src and "⁴" in tgt for src, tgt in pairs)
    keys = tmp_path / "keys"
    keys.write_text("secret ⁴\n", encoding="utf-8")
    with pytest.raises(UserError, match="keys:1: expected KEY"):
        read_keys(keys)


# --- Copy-teaching's new kinds: names of many alphabets, codes, e-mails and URLs, months ------

PAIR = ("Tom paid 30 euros.", "Tom a payé 30 euros.")


def _pairs(**shares: float) -> list[tuple[str, str]]:
    augment = EntityAugmenter(1.0, seed=4, languages=EN_FR, number_rate=1.0, **shares)
    return [pair for _ in range(40) for pair in augment(*PAIR)]


def test_names_of_many_alphabets_keep_their_accents_and_their_split() -> None:
    world = load_names(held=False, path=WORLD_NAMES_FILE)
    held = load_names(held=True, path=WORLD_NAMES_FILE)
    assert set(world.given).isdisjoint(held.given) and len(world.given) > 700
    names = {src.split()[0] for src, _ in _pairs(world_names=1.0)}
    assert names <= set(world.given) and all(not name.isascii() for name in names)
    assert len(names) > 20
    assert {"Nguyễn", "Akgündüz", "Bednář", "Assunção"} <= {*world.surnames, *held.surnames}


def test_codes_are_copied_whole_on_both_sides() -> None:
    def shape(code: str) -> str:
        """The shape of `CODE_SHAPES` that `code` has."""
        for each in CODE_SHAPES:
            kinds = {"A": str.isupper, "9": str.isdecimal}
            if len(each) == len(code) and all(
                kinds[s](c) if s in kinds else s == c for s, c in zip(each, code, strict=True)
            ):
                return each
        raise AssertionError(code)

    pairs = _pairs(codes=1.0)
    codes = [src.split(" paid ")[1].removesuffix(" euros.") for src, _ in pairs]
    assert len({shape(code) for code in codes}) > 3
    for code, (_, tgt) in zip(codes, pairs, strict=True):
        assert tgt.endswith(f" a payé {code} euros.") and not held_out(code)
    assert draw_code(random.Random(1), held=True) != draw_code(random.Random(1), held=False)


def test_e_mail_addresses_and_urls_are_made_of_names_at_example_domains() -> None:
    contacts = {src.split()[0] for src, tgt in _pairs(contacts=1.0) if src.split()[0] in tgt}
    assert len(contacts) > 20 and all(c.isascii() for c in contacts)
    pattern = (
        r"[a-z]+(\.[a-z]+)+@example\.(com|org|net)|https://www\.example\.(com|org|net)/[a-z-]+"
    )
    assert all(re.fullmatch(pattern, c) for c in contacts)
    assert contact(random.Random(2), "Łukasz", "Wiśniewski") in {
        "lukasz.wisniewski@example.com",
        "lukasz.wisniewski@example.org",
        "lukasz.wisniewski@example.net",
        "https://www.example.com/lukasz-wisniewski",
        "https://www.example.org/lukasz-wisniewski",
        "https://www.example.net/lukasz-wisniewski",
    }


def test_a_month_named_on_both_sides_is_swapped_for_another_in_each_language(
    tmp_path: Path,
) -> None:
    """Every other month comes up, each side in its own language, capitalised where the pair's
    was; a month is no name to swap ("August" in German), and a word like one is no month."""
    augment = EntityAugmenter(0.0, seed=1, languages=EN_FR, months=3.0)
    pairs = [pair for _ in range(40) for pair in augment("See you in October.", "À octobre.")]
    months = dict(zip(MONTHS["en"], MONTHS["fr"], strict=True))
    for src, tgt in pairs:
        month = re.fullmatch(r"See you in (\w+)\.", src)[1]
        assert tgt == f"À {months[month]}." and month != "October"
    assert len(pairs) == 120 and {src.split()[-1][:-1] for src, _ in pairs} == set(months) - {
        "October"
    }
    assert augment.report.pairs_with_months == 40 and augment.report.pairs_with_entities == 0
    (src, tgt), *_ = augment("October is cold.", "Octobre est froid.")
    assert src.split()[0] in MONTHS["en"] and tgt.split()[0] in [
        month.capitalize() for month in MONTHS["fr"]
    ]
    assert augment("May I come in March?", "Puis-je venir en avril ?") == []
    german = EntityAugmenter(1.0, seed=1, languages=("en", "de"), months=1.0)
    (src, tgt), *_ = german("Tom was born in August.", "Tom wurde im August geboren.")
    month = MONTHS["en"].index(src.split()[-1][:-1])
    assert not src.startswith("Tom ") and tgt.split()[-2] == MONTHS["de"][month]
    with pytest.raises(
        UserError,
        match=r"^--augment-months 2: copy-teaching knows the months of en, fr, de, not en-cs$",
    ):
        prepare("multi30k", "en", "cs", tmp_path / "p", augment_numbers=2, augment_months=2)


def test_the_new_kinds_are_off_by_default_and_need_copy_teaching(tmp_path: Path) -> None:
    defaults = load_config(None).data
    assert all(getattr(defaults, key) == 0 for key in AUGMENT_SETTINGS)
    # a share of 0 spends no draw: copy-teaching's pairs are those it gave before these kinds
    assert _pairs() == _pairs(world_names=0.0, codes=0.0, contacts=0.0, months=0.0)
    with pytest.raises(UserError, match=r"^--augment-codes 0.5: copy-teaching is off; give"):
        prepare("tatoeba", "en", "fr", tmp_path / "p", augment_codes=0.5)


# --- Concatenation ---------------------------------------------------------------------------


def test_concatenation_joins_two_to_four_pairs_in_corpus_order() -> None:
    pairs = [(f"Sentence {n}.", f"Phrase {n}.") for n in range(200)]
    join = Concatenator(0.5, seed=1)
    examples = [(n, example) for n, pair in enumerate(pairs) for example in join(*pair)]
    assert 70 < len(examples) == join.added < 130
    sizes = {src.count(".") for _, (src, _) in examples}
    assert sizes == {2, 3, 4}
    for n, (src, tgt) in examples:
        count = src.count(".")
        assert src == " ".join(f"Sentence {m}." for m in range(n - count + 1, n + 1))
        assert tgt == " ".join(f"Phrase {m}." for m in range(n - count + 1, n + 1))
    again = Concatenator(0.5, seed=1)
    assert [e for pair in pairs for e in again(*pair)] == [e for _, e in examples]
    assert Concatenator(0.0, seed=1)("a", "b") == []


def test_preparing_with_concatenation_records_it_and_keeps_the_vocabulary(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    lines = {"en": [f"Tom has {n} cats and a dog." for n in range(40)], "fr": []}
    lines["fr"] = [f"Tom a {n} chats et un chien." for n in range(40)]
    for split, (lo, hi) in {"train": (0, 30), "valid": (30, 35), "test": (35, 40)}.items():
        for lang in ("en", "fr"):
            (corpus / f"{split}.{lang}").write_text("\n".join(lines[lang][lo:hi]) + "\n")
    options = {f"{s}_{k}": None for s in ("train", "valid", "test") for k in ("src", "tgt", "tsv")}
    files = UserFiles.from_options("en", "fr", str(corpus), options)
    settings = {"vocab_size": 30, "byte_fallback": False, "files": files}
    out = prepare("files", "en", "fr", tmp_path / "p", **settings, concat_share=0.5, augment_seed=3)
    plain = prepare("files", "en", "fr", tmp_path / "plain", **settings)
    assert (out / "spm.model").read_bytes() == (plain / "spm.model").read_bytes()
    manifest = PreparedData.load(out).manifest
    assert manifest["settings"]["concat_share"] == 0.5 and manifest["settings"]["augment_seed"] == 3
    added = manifest["concatenation"]["examples_added"]
    train = read_lines(out / "train.en")
    assert 5 < added < 25 and len(train) == 30 + added
    assert "concat_share" not in PreparedData.load(plain).manifest["settings"]
    assert "concatenation" not in PreparedData.load(plain).manifest
