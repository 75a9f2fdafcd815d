"""Names and numbers: the split between copy-teaching and the entity test, copy-teaching's extra
pairs, the shipped entity test and its copy accuracy, and the figures recorded for the shipped
Tatoeba models."""

import json
import random
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from commands import run_in_process
from eval_results import SCORES, eval_result

from seq2seq.commands import main
from seq2seq.commands.evaluate import evaluation_command, parse_args, record_entity_test
from seq2seq.config_file import load_config
from seq2seq.data.augment import AUGMENT_VERSION, EntityAugmenter, entities, shared_entities
from seq2seq.data.corpora import UserFiles
from seq2seq.data.entities import (
    NUMBER,
    NUMBER_SHAPES,
    Names,
    draw_number,
    has_repeated_digit,
    held_out,
    is_name,
    load_names,
    written_in,
)
from seq2seq.data.entity_copy import (
    DIRECTIONS,
    PAIRS,
    EntityPair,
    copied,
    copy_accuracy,
    entity_test_file,
    generate,
    load_entity_test,
    tsv_text,
)
from seq2seq.data.prepare import prepare
from seq2seq.data.prepared_corpus import PreparedData
from seq2seq.decoding.model_result import ModelResult
from seq2seq.errors import UserError
from seq2seq.files import read_lines

ROOT = Path(__file__).resolve().parents[1]
NAMES = Names(given=("Ana", "Ben", "Cleo"), surnames=("Berg", "Okafor"))
EN_FR = ("en", "fr")  # the languages of the copy-teaching pairs below


def augmentation(entities: float, numbers: float, repeated_digits: float = 0.0) -> dict:
    """A configuration's copy-teaching settings, as `PreparedData.check_augmentation` takes them."""
    return {
        "augment_entities": entities,
        "augment_numbers": numbers,
        "augment_repeated_digits": repeated_digits,
    }


# --- The split ---------------------------------------------------------------------------------


def test_names_are_split_in_two_disjoint_parts() -> None:
    training, held = load_names(held=False), load_names(held=True)
    assert not set(training.given + training.surnames) & set(held.given + held.surnames)
    assert all(held_out(name) for name in held.given + held.surnames)
    assert not any(held_out(name) for name in training.given + training.surnames)
    share = len(held.given) / (len(held.given) + len(training.given))
    assert 0.08 < share < 0.12  # one key in ten
    assert "Julia" in training.given + held.given and "Schmidt" in training.surnames + held.surnames


def test_a_number_is_held_out_in_all_its_forms() -> None:
    for number in ["19.99", "2015", "14:30", "555-0142"]:
        digits = re.sub(r"\D", "", number)
        assert held_out(number) == held_out(digits) == held_out(number.replace(".", ","))
    assert held_out("Julia") == held_out("JULIA") == held_out("julia")


@pytest.mark.parametrize(
    ("like", "shape"),
    [
        ("1990", r"(19\d\d|20[0-2]\d)"),
        ("14:30", r"(1\d|2[0-3]):[0-5]\d"),
        ("9:05", r"\d:[0-5]\d"),
        ("19.99", r"[1-9]\d\.\d\d"),
        ("3,5", r"\d,\d"),
        ("555-0142", r"[1-9]\d\d-\d{4}"),
        ("48213", r"[1-9]\d{4}"),
    ],
)
def test_numbers_are_drawn_in_the_same_shape_on_their_side(like: str, shape: str) -> None:
    rng = random.Random(0)
    for held in (False, True):
        for _ in range(50):
            number = draw_number(rng, like, held=held)
            assert re.fullmatch(shape, number) and held_out(number) == held


def test_the_entity_test_uses_only_held_out_entities() -> None:
    for direction in DIRECTIONS:
        for pair in load_entity_test(direction):
            assert all(held_out(entity) for entity in pair.numbers + pair.names)


# --- Copy-teaching -----------------------------------------------------------------------------


def test_entities_are_numbers_and_capitalised_words() -> None:
    line = "Tom, I paid 19.99 € at 14:30 for OK McDonald's 3rd 555-0142."
    assert entities(line) == ["Tom", "19.99", "14:30", "3", "555-0142"]
    assert is_name("Zoé") and not is_name("zoé") and not is_name("I")
    assert shared_entities("It costs 3.5 euros, Tom.", "Tom, ça coûte 3,5 euros.") == ["Tom"]


def test_exact_substitutions_with_a_given_seed() -> None:
    augment = EntityAugmenter(1.0, seed=9, languages=EN_FR, names=NAMES)
    pairs = [
        ("Tom met Mary Berg in 1990.", "Tom a rencontré Mary Berg en 1990."),
        ("It is 9:05, Tom.", "Il est 9:05, Tom."),
        ("Call 555-0142 and pay 19.99.", "Appelle le 555-0142 et paie 19.99."),
    ]
    assert [augment(src, tgt) for src, tgt in pairs] == [
        # a phone number for a year (any shape), a surname for a surname
        [("Ben met Ana Okafor in 258-9062.", "Ben a rencontré Ana Okafor en 258-9062.")],
        # a time for a time (its shape); a full name for a given name in a pair without surname
        [("It is 6:10, Ana Berg.", "Il est 6:10, Ana Berg.")],
        [("Call 243-6450 and pay 16.16.", "Appelle le 243-6450 et paie 16.16.")],
    ]
    assert augment.report.to_dict() == {
        "pairs_with_entities": 3,
        "pairs_added": 3,
        "pairs_with_numbers": 3,
        "pairs_added_for_numbers": 3,
    }


@pytest.mark.parametrize(
    ("rate", "number_rate", "added"), [(1, 3, [1, 3, 3]), (3, 1, [3, 1, 3]), (2, 0, [2, 2, 2])]
)
def test_a_pair_sharing_a_number_gets_the_number_rate(
    rate: float, number_rate: float, added: list[int]
) -> None:
    """A name only: `rate` extra pairs; a number only: `number_rate` (0: `rate`); both: the
    larger of the two."""
    augment = EntityAugmenter(rate, seed=1, languages=EN_FR, names=NAMES, number_rate=number_rate)
    pairs = [
        ("Tom is here.", "Tom est là."),
        ("He has 12 cats.", "Il a 12 chats."),
        ("Tom has 12 cats.", "Tom a 12 chats."),
        ("I am here.", "Je suis là."),
    ]
    assert [len(augment(*pair)) for pair in pairs] == [*added, 0]
    assert augment.report.to_dict() == {
        "pairs_with_entities": 3,
        "pairs_added": sum(added),
        "pairs_with_numbers": 2,
        "pairs_added_for_numbers": added[1] + added[2],
    }


def test_the_same_seed_gives_the_same_pairs_and_another_seed_others() -> None:
    pairs = [(f"Tom has {n} cats.", f"Tom a {n} chats.") for n in range(10, 60)]
    runs = [
        [EntityAugmenter(0.5, seed, languages=EN_FR)(*pair) for pair in pairs] for seed in (1, 1, 2)
    ]
    assert runs[0] == runs[1] != runs[2]


def _augment_all(augment: EntityAugmenter, pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The extra pairs `augment` gives `pairs`, one pair after the other."""
    return [extra for pair in pairs for extra in augment(*pair)]


def test_the_number_rate_keeps_the_draws_seeded() -> None:
    """The same seed gives the same pairs, another seed others; a number rate of 0, or equal to
    the rate, gives the pairs of an augmenter without one (so folders prepared before it came
    are made again byte for byte)."""
    pairs = [(f"He has {n} cats.", f"Il a {n} chats.") for n in range(10, 40)]
    pairs += [(f"Tom is {n}.", f"Tom a {n} ans.") for n in range(10, 40)]
    pairs += [("Tom is here.", "Tom est là.")] * 30
    runs = [
        _augment_all(EntityAugmenter(0.5, s, languages=EN_FR, number_rate=2.5), pairs)
        for s in (1, 1, 2)
    ]
    assert runs[0] == runs[1] != runs[2]
    assert 60 * 2 + 30 * 0 <= len(runs[0]) <= 60 * 3 + 30 * 1
    without = _augment_all(EntityAugmenter(0.5, 1, languages=EN_FR), pairs)
    for number_rate in (0.0, 0.5):
        assert (
            _augment_all(EntityAugmenter(0.5, 1, languages=EN_FR, number_rate=number_rate), pairs)
            == without
        )


@pytest.mark.parametrize(("rate", "fewest", "most"), [(0.3, 2850, 3150), (2.5, 24850, 25150)])
def test_the_rate_is_respected_on_a_large_sample(rate: float, fewest: int, most: int) -> None:
    """10,000 pairs, each with int(rate) extra pairs and one more with probability 0.3 or 0.5:
    within 3.3 standard deviations (46 and 50 pairs) of the mean."""
    augment = EntityAugmenter(rate, seed=1, languages=EN_FR, names=NAMES)
    added = [augment(f"Tom has {n} cats.", f"Tom a {n} chats.") for n in range(10_000)]
    assert augment.report.pairs_with_entities == 10_000
    assert {len(pairs) for pairs in added} == {int(rate), int(rate) + 1}
    assert augment.report.pairs_added == sum(map(len, added))
    assert fewest < augment.report.pairs_added < most
    full_names = 0
    for src, tgt in [pair for pairs in added for pair in pairs]:  # one new name and number
        name, number = re.fullmatch(r"(.+) has (\S+) cats\.", src).groups()
        assert tgt == f"{name} a {written_in(number, 'fr')} chats."
        given, *surname = name.split(" ")
        assert given in NAMES.given and surname in ([], *([s] for s in NAMES.surnames))
        full_names += len(surname)
    # a third of the names put in are full names: within 3.3 standard deviations
    count = augment.report.pairs_added
    assert abs(full_names - count / 3) < 3.3 * (count * 2 / 9) ** 0.5


def test_pairs_without_a_shared_entity_are_untouched() -> None:
    augment = EntityAugmenter(1.0, seed=1, languages=EN_FR, names=NAMES)
    for src, tgt in [
        ("I am here.", "Je suis là."),
        ("It costs 3.5 euros.", "Ça coûte 3,5 euros."),  # a number in two forms
        ("Peter is here.", "Pierre est là."),  # a name in two forms
    ]:
        assert augment(src, tgt) == []
    assert set(vars(augment.report).values()) == {0}


@pytest.mark.parametrize(
    ("number", "language", "written"),
    [
        ("19.99", "fr", "19,99"),
        ("3.5", "de", "3,5"),
        ("19.99", "en", "19.99"),
        ("14:30", "fr", "14:30"),
        ("555-0142", "fr", "555-0142"),
        ("2015", "fr", "2015"),
        ("1,000", "fr", "1,000"),  # not a decimal as English writes one
    ],
)
def test_numbers_are_written_as_each_language_writes_them(
    number: str, language: str, written: str
) -> None:
    assert written_in(number, language) == written


def _shape(number: str) -> str:
    """ "19.99" -> "d.d": the separators of `number`, its digit runs as d."""
    return re.sub(r"\d+", "d", number)


def test_half_the_numbers_put_in_have_any_shape_written_per_language() -> None:
    """2,000 pairs sharing an age: about half the new numbers are two-digit ages, the others of
    every shape of NUMBER_SHAPES, decimals with a point in English and a comma in French; every
    one is a training number."""
    augment = EntityAugmenter(1.0, seed=3, languages=EN_FR, names=NAMES)
    ages = [20 + n % 70 for n in range(2000)]
    added = [pair for n in ages for pair in augment(f"He is {n}.", f"Il a {n} ans.")]
    assert len(added) == 2000
    numbers = [(NUMBER.search(src)[0], NUMBER.search(tgt)[0]) for src, tgt in added]
    assert all(fr == written_in(en, "fr") and not held_out(en) for en, fr in numbers)
    shapes = [_shape(en) for en, _ in numbers]
    same = sum(re.fullmatch(r"\d\d", en) is not None for en, _ in numbers)
    assert 900 < same < 1200  # half, and the other half's two-digit integers (1 in 10)
    assert set(shapes) == {_shape(shape) for shape in NUMBER_SHAPES}
    assert any(fr != en for en, fr in numbers) and all("." not in fr for _, fr in numbers)


@pytest.mark.parametrize(("share", "fewest", "most"), [(0.0, 200, 380), (0.5, 940, 1100)])
def test_a_share_of_the_numbers_put_in_have_a_repeated_digit(
    share: float, fewest: int, most: int
) -> None:
    """2,000 pairs sharing an age: of the new numbers whose shape has room for two equal digits
    side by side (all but one-digit integers and "3.5"), the share asked for has them, and
    about a sixth of the others by chance; all of them at a share of 1."""
    for asked in (share, 1.0):
        augment = EntityAugmenter(1.0, seed=3, languages=EN_FR, names=NAMES, repeated_digits=asked)
        ages = [20 + n % 70 for n in range(2000)]
        added = [pair for n in ages for pair in augment(f"He is {n}.", f"Il a {n} ans.")]
        numbers = [NUMBER.search(src)[0] for src, _ in added]
        with_room = [number for number in numbers if re.search(r"\d\d", number)]
        repeated = sum(has_repeated_digit(number) for number in with_room)
        assert len(with_room) > 1700 and not any(held_out(number) for number in numbers)
        if asked == 1.0:
            assert repeated == len(with_room)
        else:
            assert fewest < repeated < most


@pytest.mark.parametrize("like", NUMBER_SHAPES)
def test_a_number_drawn_with_a_repeated_digit_keeps_its_shape(like: str) -> None:
    rng = random.Random(4)
    for held in (False, True):
        numbers = [draw_number(rng, like, held, repeated_digit=True) for _ in range(50)]
        assert {_shape(number) for number in numbers} == {_shape(like)}
        assert all(held_out(number) == held for number in numbers)
        if re.search(r"\d\d", like):  # "7" and "3.5" have no room for one
            assert all(has_repeated_digit(number) for number in numbers)
    assert has_repeated_digit("19.99") and has_repeated_digit("876-7714")
    assert not has_repeated_digit("12-21") and not has_repeated_digit("48213")


def _write_corpus(folder: Path) -> None:
    folder.mkdir()
    sides = {"en": [], "fr": []}
    for n in range(60):
        sides["en"].append(f"Tom has {n + 2} cats and a dog.")
        sides["fr"].append(f"Tom a {n + 2} chats et un chien.")
    sides["en"] += ["I am here."] * 20
    sides["fr"] += ["Je suis là."] * 20
    for split, (lo, hi) in {"train": (0, 80), "valid": (0, 10), "test": (10, 20)}.items():
        for lang, lines in sides.items():
            (folder / f"{split}.{lang}").write_text("\n".join(lines[lo:hi]) + "\n")


def test_preparing_augments_the_training_split_only(tmp_path: Path) -> None:
    _write_corpus(tmp_path / "corpus")
    files = UserFiles.from_options(
        "en",
        "fr",
        str(tmp_path / "corpus"),
        {f"{s}_{k}": None for s in ("train", "valid", "test") for k in ("src", "tgt", "tsv")},
    )
    settings = {"vocab_size": 40, "byte_fallback": False, "files": files}
    out = prepare(
        "files", "en", "fr", tmp_path / "p", **settings, augment_entities=1.5, augment_seed=3
    )
    # the tokenizer learns from the corpus's own pairs: the same as without copy-teaching
    plain = prepare("files", "en", "fr", tmp_path / "plain", **settings)
    assert (out / "spm.model").read_bytes() == (plain / "spm.model").read_bytes()
    data = PreparedData.load(out)
    manifest = data.manifest
    assert manifest["settings"]["augment_entities"] == 1.5
    assert manifest["settings"]["augment_seed"] == 3
    assert "augment_numbers" not in manifest["settings"]  # recorded only when set
    assert "augment_repeated_digits" not in manifest["settings"]
    assert manifest["settings"]["augment_version"] == AUGMENT_VERSION == 3
    added = manifest["augmentation"]["pairs_added"]
    assert manifest["augmentation"]["pairs_with_entities"] == 60 and 60 + 15 < added < 60 + 45
    train = read_lines(out / "train.en")
    assert len(train) == manifest["lines"]["train"] == 80 + added
    assert train.count("I am here.") == 20 and train[0] == "Tom has 2 cats and a dog."
    for split in ("valid", "test"):
        for lang in ("en", "fr"):
            assert read_lines(out / f"{split}.{lang}") == read_lines(
                tmp_path / "corpus" / f"{split}.{lang}"
            )
    data.check_augmentation(augmentation(1.5, 0.0))
    with pytest.raises(UserError, match=r"data.augment_entities 0.0: .* --augment-entities 1.5"):
        data.check_augmentation(augmentation(0.0, 0.0))
    with pytest.raises(UserError, match=r"^data.augment_numbers 20.0: .* --augment-numbers 0.0;"):
        data.check_augmentation(augmentation(1.5, 20.0))
    data.manifest["settings"]["augment_version"] = 2
    with pytest.raises(UserError) as refused:
        data.check_augmentation(augmentation(1.5, 0.0))
    assert str(refused.value) == (
        f"data.prepared: {out} was prepared by copy-teaching version 2, not 3; run seq2seq "
        "prepare with its options again (it rebuilds the folder), or delete it and pass --prepare"
    )
    del data.manifest["settings"]["augment_version"]  # a folder prepared before version 2
    with pytest.raises(UserError, match=r"by copy-teaching version 1, not 3;"):
        data.check_augmentation(augmentation(1.5, 0.0))


def _write_pairs(folder: Path, train: list[tuple[str, str]]) -> None:
    """`folder` with `train` as its training split and two pairs in each of valid and test."""
    folder.mkdir()
    other = [("I am here.", "Je suis là."), ("You are there.", "Tu es là-bas.")]
    for split, pairs in {"train": train, "valid": other, "test": other}.items():
        for side, lang in enumerate(("en", "fr")):
            lines = "".join(pair[side] + "\n" for pair in pairs)
            (folder / f"{split}.{lang}").write_text(lines, encoding="utf-8")


def _prepare_command(corpus: Path, out: Path, *options: str) -> list[str]:
    return [
        "prepare",
        *("--corpus", "files", "--src", "en", "--tgt", "fr", "--data-dir", str(corpus)),
        *("--out", str(out), "--vocab-size", "40", "--no-byte-fallback", *options),
    ]


def test_preparing_gives_pairs_sharing_a_number_their_own_rate(tmp_path: Path) -> None:
    """seq2seq prepare --augment-entities 1 --augment-numbers 3: 10 pairs sharing a name get 1
    extra pair each, 10 sharing a number 3, 10 sharing both 3; the same seed, the same pairs."""
    train = [("Tom is here.", "Tom est là.")] * 10
    train += [(f"He has {n} cats.", f"Il a {n} chats.") for n in range(2, 12)]
    train += [(f"Tom has {n} dogs.", f"Tom a {n} chiens.") for n in range(20, 30)]
    train += [("I am here.", "Je suis là.")] * 10
    _write_pairs(tmp_path / "corpus", train)
    options = ["--augment-entities", "1", "--augment-numbers", "3", "--seed", "5"]
    outs = [tmp_path / name for name in ("p", "again", "seed6")]
    for out, seed in zip(outs, ["5", "5", "6"], strict=True):
        main(_prepare_command(tmp_path / "corpus", out, *options[:-1], seed))
    data = PreparedData.load(outs[0])
    settings = data.manifest["settings"]
    assert (settings["augment_entities"], settings["augment_numbers"]) == (1.0, 3.0)
    assert settings["augment_seed"] == 5
    assert data.manifest["augmentation"] == {
        "pairs_with_entities": 30,
        "pairs_added": 10 + 30 + 30,
        "pairs_with_numbers": 20,
        "pairs_added_for_numbers": 30 + 30,
    }
    assert data.manifest["lines"]["train"] == len(read_lines(outs[0] / "train.en")) == 40 + 70
    texts = [(out / "train.en").read_bytes() for out in outs]
    assert texts[0] == texts[1] != texts[2]
    data.check_augmentation(augmentation(1.0, 3.0))
    with pytest.raises(UserError) as refused:
        data.check_augmentation(augmentation(1.0, 0.0))
    assert str(refused.value) == (
        f"data.augment_numbers 0.0: {outs[0]} was prepared with --augment-numbers 3.0; set "
        "data.augment_numbers=3.0 or give data.prepared another folder, which --prepare writes"
    )


@pytest.mark.parametrize("rate", ["-1", "51", "lots"])
def test_prepare_refuses_a_number_rate_out_of_range(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], rate: str
) -> None:
    out = tmp_path / "p"
    with pytest.raises(SystemExit) as exit_info:
        main(_prepare_command(tmp_path / "corpus", out, "--augment-numbers", rate))
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: argument --augment-numbers: ") and err.count("\n") == 1
    assert not out.exists()


def test_preparing_with_repeated_digits_records_the_share(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--augment-repeated-digits 1: every number put in with room for it has a digit repeated;
    the manifest records the share, training checks it, and without copy-teaching it is refused."""
    _write_corpus(tmp_path / "corpus")  # 80 training pairs, 60 sharing "Tom" and a number
    out = tmp_path / "p"
    options = ["--augment-entities", "2", "--augment-repeated-digits", "1"]
    main(_prepare_command(tmp_path / "corpus", out, *options))
    data = PreparedData.load(out)
    assert data.manifest["settings"]["augment_repeated_digits"] == 1.0
    corpus = set(read_lines(tmp_path / "corpus" / "train.en"))
    added = [line for line in read_lines(out / "train.en") if line not in corpus]
    numbers = [NUMBER.search(line)[0] for line in added]
    assert len(numbers) == 60 * 2
    assert all(has_repeated_digit(n) for n in numbers if re.search(r"\d\d", n))
    data.check_augmentation(augmentation(2.0, 0.0, 1.0))
    with pytest.raises(UserError) as refused:
        data.check_augmentation(augmentation(2.0, 0.0))
    assert str(refused.value) == (
        f"data.augment_repeated_digits 0.0: {out} was prepared with --augment-repeated-digits "
        "1.0; set data.augment_repeated_digits=1.0 or give data.prepared another folder, which "
        "--prepare writes"
    )
    capsys.readouterr()
    for options, message in [
        (
            ["--augment-repeated-digits", "0.5"],
            "--augment-repeated-digits 0.5: copy-teaching is "
            "off; give --augment-entities or --augment-numbers too",
        ),
        (
            ["--augment-entities", "2", "--augment-repeated-digits", "1.5"],
            "argument --augment-repeated-digits: ",
        ),
    ]:
        with pytest.raises(SystemExit) as exit_info:
            main(_prepare_command(tmp_path / "corpus", tmp_path / "q", *options))
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and err.startswith(f"error: {message}")
        assert err.count("\n") == 1 and not (tmp_path / "q").exists()
    with pytest.raises(UserError, match=r"data\.augment_repeated_digits"):
        load_config(None, ["data.augment_repeated_digits=1.5"])


def test_the_tatoeba_configurations_turn_copy_teaching_on() -> None:
    for direction in DIRECTIONS:
        data = load_config(ROOT / "configs" / f"transformer.tatoeba.{direction}.toml").data
        assert (data.augment_entities, data.augment_numbers) == (2.0, 20.0)
    # the shipped fr-en model was trained with more repeated digits, the en-fr one without
    # (docs/experiments.md)
    en_fr, fr_en = (
        load_config(ROOT / "configs" / f"transformer.tatoeba.{direction}.toml")
        for direction in ("en-fr", "fr-en")
    )
    assert (en_fr.data.augment_repeated_digits, fr_en.data.augment_repeated_digits) == (0, 0.5)
    assert en_fr.decode.keep_numbers and fr_en.decode.keep_numbers
    multi30k = load_config(ROOT / "configs" / "transformer.multi30k.en-de.toml")
    assert (multi30k.data.augment_entities, multi30k.data.augment_numbers) == (0, 0)
    with pytest.raises(UserError, match=r"data\.augment_entities"):
        load_config(None, ["data.augment_entities=-1"])
    with pytest.raises(UserError, match=r"data\.augment_numbers"):
        load_config(None, ["data.augment_numbers=51"])


# --- The entity test ---------------------------------------------------------------------------


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_the_shipped_entity_test_is_regenerated_byte_for_byte(direction: str) -> None:
    test = generate(direction)
    assert len(test) == PAIRS and len({pair.source for pair in test}) > PAIRS * 0.95
    assert tsv_text(test).encode() == entity_test_file(direction).read_bytes()
    assert load_entity_test(direction) == test


def test_decimals_are_written_as_the_target_writes_them() -> None:
    en_fr = {p.source: p for p in load_entity_test("en-fr")}
    fr_en = {p.reference: p for p in load_entity_test("fr-en")}
    price = next(p for s, p in en_fr.items() if s.startswith("This book costs"))
    number = price.source.split()[3]
    assert re.fullmatch(r"\d+\.\d\d", number) and price.numbers == (number.replace(".", ","),)
    back = next(p for r, p in fr_en.items() if r.startswith("This book costs"))
    assert re.fullmatch(r"\d+\.\d\d", back.numbers[0]) and "," in back.source


def test_there_is_no_entity_test_for_other_directions() -> None:
    with pytest.raises(UserError, match="no entity test for en-de"):
        load_entity_test("en-de")


@pytest.mark.parametrize(
    ("entity", "translation", "found"),
    [
        ("2015", "Il est né en 2015.", True),
        ("205", "Il est né en 2050.", False),
        ("2015", "Il est né en 205.", False),
        ("19,99", "Ça coûte 19,99 euros.", True),
        ("19,99", "Ça coûte 19.99 euros.", False),
        ("19", "Ça coûte 19,99 euros.", False),
        ("14:30", "à 14:30.", True),
        ("14:30", "à 14:305", False),
        ("Jo", "John est là.", False),
        ("Jo", "C'est Jo.", True),
        ("Anna", "L'Anna d'Anna's", True),
        ("Anna", "anna", False),
    ],
)
def test_copied_is_an_exact_whole_token(entity: str, translation: str, found: bool) -> None:
    assert copied(entity, translation) == found


def test_copy_accuracy_counts_each_entity() -> None:
    test = [
        EntityPair("s", "r", ("2015",), ("Pierre", "Sophie")),
        EntityPair("s", "r", ("19,99", "48213"), ()),
    ]
    accuracy = copy_accuracy(test, ["Preaty and Sophie in 205", "19,99 euros, 48213"])
    assert accuracy.to_dict() == {
        "number_copy_accuracy": pytest.approx(200 / 3),
        "name_copy_accuracy": 50.0,
        "code_copy_accuracy": 0.0,
        "entity_copy_accuracy": 60.0,
        "all_copied_accuracy": 50.0,
        "numbers": 3,
        "numbers_copied": 2,
        "names": 2,
        "names_copied": 1,
        "codes": 0,
        "codes_copied": 0,
        "sentences": 2,
        "sentences_all_copied": 1,
    }


# --- The shipped Tatoeba models ----------------------------------------------------------------

SHIPPED = [f"transformer-small.tatoeba.{direction}" for direction in DIRECTIONS]


@pytest.mark.slow  # translates 300 sentences
@pytest.mark.parametrize("name", SHIPPED)
def test_the_recorded_entity_test_is_reproduced_on_the_shipped_model(name: str) -> None:
    record = ModelResult.load(ROOT / "results" / "models" / f"{name}.shipped.json")
    card = ModelResult.load(ROOT / "seq2seq" / "shipped_models" / name / "card.json")
    recorded = record.entity_test
    assert card.entity_test == recorded and recorded["sentences"] == PAIRS
    options = ["--split", "entities", "--json", "--device", "cpu"]
    options += ["--beam", str(recorded["beam_size"]), "--precision", recorded["decode_precision"]]
    options.append("--keep-numbers" if recorded["keep_numbers"] else "--no-keep-numbers")
    result = run_in_process(["evaluate", "--model", name, *options])
    assert result.returncode == 0, result.stderr
    scores = json.loads(result.stdout)
    assert scores["copy_accuracy"] == {key: recorded[key] for key in scores["copy_accuracy"]}
    assert scores["signatures"] == recorded["signatures"]
    assert scores["bleu"] == pytest.approx(recorded["bleu"], abs=0.1)
    assert scores["chrf"] == pytest.approx(recorded["chrf"], abs=0.1)


def test_recording_the_entity_test_changes_nothing_else(tmp_path: Path) -> None:
    path = tmp_path / "record.json"
    original = (ROOT / "results" / "models" / f"{SHIPPED[0]}.shipped.json").read_text()
    before = json.loads(original)
    del before["entity_test"]
    path.write_text(json.dumps(before, indent=1))
    args = parse_args(["--model", SHIPPED[0], "--split", "entities", "--record", str(path)])
    scores = SCORES
    copied = {"number_copy_accuracy": 50.0, "numbers": 2, "numbers_copied": 1}
    result = eval_result(300, copy_accuracy=copied)
    record_entity_test(path, args, result)
    after = json.loads(path.read_text())
    recorded = after.pop("entity_test")
    assert after == before
    keys = [*scores, "numbers_copied", "beam_size", "keep_numbers"]
    assert {key: recorded[key] for key in keys} == {
        **scores,
        "numbers_copied": 1,
        "beam_size": 5,
        "keep_numbers": True,
    }
    assert recorded["command"] == (
        f"seq2seq evaluate --model {SHIPPED[0]} --split entities --beam 5 --precision fp32 "
        "--keep-numbers"
    )
    assert ModelResult.load(path).entity_test == recorded


@pytest.mark.parametrize(
    ("option", "used", "flag"),
    [([], True, " --keep-numbers"), (["--no-keep-numbers"], False, " --no-keep-numbers")],
)
def test_the_recorded_command_says_whether_numbers_were_kept(
    option: list[str], used: bool, flag: str
) -> None:
    """The Tatoeba models keep numbers by default: a record says so, and an evaluation without
    the guard records the option that turned it off."""
    args = parse_args(["--model", SHIPPED[0], "--split", "test", *option])
    result = SimpleNamespace(beam_size=5, precision="fp32", keep_numbers=used, split_sentences=True)
    assert evaluation_command(args, result) == (
        f"seq2seq evaluate --model {SHIPPED[0]} --split test --beam 5 --precision fp32{flag}"
    )


def test_the_entity_test_is_recorded_in_an_existing_record_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.json"
    with pytest.raises(SystemExit) as exit_info:
        parse_args(["--model", SHIPPED[0], "--split", "entities", "--record", str(missing)])
    assert exit_info.value.code == 2
    assert (
        f"--record {missing}: --split entities adds to an existing record"
        in capsys.readouterr().err
    )
