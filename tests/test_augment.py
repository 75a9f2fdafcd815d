"""Copy-teaching (seq2seq.data.augment): which entities it finds and swaps."""

from pathlib import Path

import pytest

from seq2seq.data.augment import EntityAugmenter, entities
from seq2seq.errors import UserError
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
