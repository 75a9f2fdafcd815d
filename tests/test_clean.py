"""Normalisation of every line and filtering of the training pairs."""

from seq2seq.data.clean import CleanReport, normalize


def test_normalize() -> None:
    assert normalize("Cafe\u0301") == "Café"  # NFD -> NFC
    assert normalize("  a\tb \u2028 c\r") == "a b c"
    assert normalize("two  spaces   here") == "two spaces here"
    assert normalize("Va\u202f!") == "Va\u202f!"  # French narrow no-break space is kept
    assert normalize(" \t ") == ""


def test_clean_pairs_counts_each_reason() -> None:
    pairs = [
        ("a small house", "ein kleines Haus"),  # kept
        ("", "leer"),  # empty
        ("   ", "  "),  # whitespace only: no words
        ("word " * 5, "w"),  # 5:1, kept
        ("one", "w " * 9),  # ratio exactly 9: kept
        ("one", "w " * 10),  # ratio 10: dropped
        ("w " * 10, "w " * 10),  # exactly max_words: kept
        ("w " * 11, "w"),  # over max_words: too long (checked before the ratio)
        ("w " * 11, ""),  # empty (checked first)
    ]
    report = CleanReport(max_words=10, max_ratio=9)
    kept = [pair for pair in pairs if report.keep(*pair)]
    assert kept == [pairs[0], pairs[3], pairs[4], pairs[6]]
    assert report.to_dict() == {
        "pairs": 9,
        "kept": 4,
        "empty": 3,
        "too_long": 1,
        "length_ratio": 1,
        "max_words": 10,
        "max_ratio": 9,
    }
    assert str(report) == (
        "kept 4 of 9 training pairs; dropped 3 with an empty side, 1 over 10 words, "
        "1 with a length ratio over 9"
    )
