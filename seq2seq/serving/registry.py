"""The models a server holds: each one's translator and what GET /v1/models says about it.

A model served from a CTranslate2 folder (or converted for it, --engine ctranslate2) has no
PyTorch model: such a server translates without ever importing torch, and its attention
explorer is off (seq2seq.serving.state)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seq2seq.config import Config
from seq2seq.decoding.line_translator import LineTranslator
from seq2seq.decoding.model_folder import CARD
from seq2seq.decoding.model_result import domain_and_limits, read_card

if TYPE_CHECKING:  # a PyTorch model's server imports torch; a CTranslate2 folder's does not
    import torch

    from seq2seq.decoding.open_pytorch import Inference
    from seq2seq.decoding.torch_translator import Translator

# What GET /v1/models shows of a model card (card.json, written by seq2seq evaluate --record).
CARD_SCORES = ("corpus", "split", "bleu", "bleu_lc", "chrf", "signatures", "beam_size")


@dataclass
class ServedModel:
    """One loaded model, under the name that requests give in "model"."""

    name: str
    translator: LineTranslator  # translates: PyTorch's or CTranslate2's (--engine)
    # the explorer's attention maps come from PyTorch whatever the engine; None for a
    # CTranslate2 folder, which has no PyTorch model
    pytorch: Translator | None
    source: str  # language codes, e.g. "en" and "de"
    target: str
    family: str  # the model preset, e.g. "transformer-tiny"
    domain: str  # the text it was trained on, so what it translates well
    limits: list[dict[str, str]]  # what it gets wrong, each with an example (its card's)
    parameters: int | None  # None: a CTranslate2 folder that does not record it
    scores: dict[str, Any] | None  # the model card's test scores, when it has one

    def info(self) -> dict[str, Any]:
        """The model as GET /v1/models describes it."""
        cfg = self.translator.decode_cfg
        return {
            "name": self.name,
            "source": self.source,
            "target": self.target,
            "family": self.family,
            "domain": self.domain,
            "limits": self.limits,
            "parameters": self.parameters,
            "precision": self.translator.precision,
            "beam": cfg.beam_size,
            "length_penalty": cfg.length_penalty,
            "max_len_ratio": cfg.max_len_ratio,
            "keep_numbers": cfg.keep_numbers,
            "scores": self.scores,
        }


def served_name(inference: Inference) -> str:
    """The name a loaded model is served under: an exported model's folder name (e.g.
    "transformer-tiny.multi30k.en-de"), or a checkpoint's run folder and file name ("run/best")."""
    path = inference.path
    if path is None:
        raise ValueError("a model built in memory has no name; give served_model one")
    return path.name if inference.card is not None else f"{path.resolve().parent.name}/{path.stem}"


def served_model(
    name: str, inference: Inference, device: torch.device, ctranslate2: bool = False
) -> ServedModel:
    """A model to serve, from a loaded checkpoint or exported model (decode options applied to
    inference.config.decode) and its card.json, if any; with `ctranslate2`, translated by
    CTranslate2, the attention maps still computed by PyTorch."""
    from seq2seq.decoding.ct2_convert import translator_from_inference
    from seq2seq.decoding.torch_translator import Translator

    translator = pytorch = Translator.from_inference(inference, device)
    if ctranslate2:
        translator = translator_from_inference(inference, device.type)
        translator.attention_translator = pytorch
    parameters = sum(p.numel() for p in inference.model.parameters())
    return _served(name, translator, pytorch, inference.config, parameters, inference.card)


def served_folder(
    name: str, folder: Path, translator: LineTranslator, config: Config, parameters: int | None
) -> ServedModel:
    """A model to serve from a folder opened without torch (a CTranslate2 folder, or a shipped
    or exported model converted for CTranslate2) as `translator` with `config`, and its
    `parameters`; no PyTorch model, so no attention explorer."""
    return _served(name, translator, None, config, parameters, folder / CARD)


def _served(
    name: str,
    translator: LineTranslator,
    pytorch: Translator | None,
    config: Config,
    parameters: int | None,
    card: Path | None,
) -> ServedModel:
    domain, limits = domain_and_limits(card, config.data.corpus)
    return ServedModel(
        name=name,
        translator=translator,
        pytorch=pytorch,
        source=config.data.src,
        target=config.data.tgt,
        family=config.model.name,
        domain=domain,
        limits=limits,
        parameters=parameters,
        scores=read_card_scores(card) if card is not None and card.is_file() else None,
    )


def read_card_scores(path: Path) -> dict[str, Any]:
    """The test scores of a model card; a card that is not JSON is a UserError naming it."""
    card = read_card(path)
    return {key: card[key] for key in CARD_SCORES if key in card}
