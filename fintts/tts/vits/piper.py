"""The voice as a Piper voice: ``NAME.onnx`` + ``NAME.onnx.json`` that Piper (``piper-tts`` 1.8) and Home Assistant speak.

Piper reads a voice whose ``phoneme_type`` is ``text`` this way (``piper/voice.py``,
``piper/phoneme_ids.py``): the text is decomposed to NFD (``ä`` arrives as ``a`` + U+0308),
each code point is looked up in ``phoneme_id_map`` (one not there is skipped), and the ids are
``^ _ c1 _ c2 _ … cn _ $``: the ids of ``^`` (start), ``_`` (pad) after it and after every
character, ``$`` (end). The graph gets them as ``input [1, T]`` with ``input_lengths [1]``,
``scales [3]`` (noise, length, noise_w) and, for a voice of several speakers, ``sid [1]``, and
returns the audio ``[1, 1, samples]``. Piper runs no normaliser of ours, and a map from one
code point to ids cannot compose ``a`` + U+0308, squeeze the spaces that punctuation leaves,
or tell an apostrophe inside a word from a quote. So the graph starts with fintts's own
reading of written text, as tensors:

1. the characters: every map entry is one id, so the characters sit at ``input[2:-1:2]``
   (a ``_``, ``^`` or ``$`` in the text is a character there too, not Piper's marker);
2. composition (NFD back to NFC): a letter and the combining mark after it become the
   composed letter, as many times as marks stack;
3. each letter as :meth:`FinnishText.normalize` reads it: lower case, letters outside the
   vocabulary by their fallback (``é`` → ``e``, ``ß`` → ``ss``), ``&`` → " ja ", quotes
   dropped, other punctuation a word break; a digit is read as its word, digit by digit;
4. in-word apostrophes and hyphens kept where the vocabulary has them, the rest dropped;
   runs of spaces squeezed, ends trimmed; then the blank between ids (``add_blank``);
5. :class:`~fintts.tts.vits.inference.VitsSynthesizer` with its noise drawn in the graph
   (``RandomNormalLike``), scaled by ``scales``.

The tables of steps 2-4 are made at export by running the voice's own
:class:`~fintts.tts.text.FinnishText` on each character, so the graph reads as the voice does:
for text without digits and without the abbreviations fintts expands (``esim.``, ``klo``, ``n.``
…), Piper with ``noise_scale=0, noise_w=0`` and ``normalize_audio`` off gives the samples
``VitsModel`` gives for ``FinnishText.encode`` of the same text (tests/tts/vits/test_piper.py
holds it to float32 rounding). Numbers are fintts's normaliser's job: Piper reads ``12`` as
"yksi kaksi"; write numbers as words for Piper. Piper's text mode speaks the whole text as one
sentence (Home Assistant splits sentences itself), and by default scales each sentence's peak
to full volume (``normalize_audio``), which ``fintts say`` does not.

What the map holds: the Latin, Greek and Cyrillic letters, the combining marks, ASCII and the
general punctuation, currency and whitespace (about 1,700 code points); a character outside
them is skipped by Piper, as fintts drops it (it may then differ only where it stood next to an
in-word apostrophe or hyphen).
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn
from transformers import VitsModel

from fintts.tts.text import _APOSTROPHES, FinnishText
from fintts.tts.vits.inference import VitsSynthesizer, fold_weight_norm, load_saved
from fintts.tts.voice_format import PIPER_FILE, SPEAKERS_FILE, VoiceError

#: Code-point ranges in the map (see the module docstring): ASCII and Latin-1 to IPA and the spacing modifiers,
#: combining marks, Greek, Cyrillic, Latin Extended Additional, general punctuation, currency, letterlike symbols, ligatures.
_RANGES = ((0x20, 0x36F), (0x370, 0x3FF), (0x400, 0x4FF), (0x1E00, 0x1EFF), (0x2000, 0x206F), (0x20A0, 0x20CF), (0x2100, 0x214F),
           (0xFB00, 0xFB06))
_EXTRA = "\t\n\u000b\u000c\r\u0085\u3000〝〞＂"
_DIGITS = "nolla yksi kaksi kolme neljä viisi kuusi seitsemän kahdeksan yhdeksän".split()
_LETTER = re.compile(r"[^\W\d_]")  # text.py's "inside a word" test
_PAD, _BOS, _EOS = "_", "^", "$"
_OPSET = 17
#: Marks after a letter that composition looks through (NFD puts at most three on any Latin, Greek or Cyrillic letter).
_WINDOW = 3


@dataclass
class PiperTables:
    """What the graph's reading of text needs (module docstring, steps 1-4), made from a :class:`FinnishText`."""

    symbols: list[str]          #: symbol id -> the character (NFC) it stands for
    id_map: dict[str, int]      #: Piper's phoneme_id_map: input code point -> symbol id
    compose: list[list[int]]    #: [symbol][mark column] -> composed symbol, -1: none
    mark_column: list[int]      #: symbol -> its column in ``compose`` (0: not a composing mark)
    combining: list[int]        #: symbol -> its canonical combining class
    passes: int                 #: how many marks stack at most
    expand: list[list[int]]     #: symbol -> the tokens it reads as, padded with -1
    tokens: list[str]           #: token id -> character, after the letter step
    token_id: list[int]         #: token -> vocabulary id alone (-1: dropped; the space's id: a word break)
    letter: list[bool]          #: token is a letter (for in-word apostrophes and hyphens)
    apostrophe: list[bool]      #: token is an apostrophe kept inside a word
    hyphen: list[bool]          #: token is a hyphen kept inside a word
    apostrophe_id: int
    hyphen_id: int
    space_id: int
    add_blank: bool

    @classmethod
    def build(cls, text: FinnishText) -> PiperTables:
        wanted = {chr(c) for lo, hi in _RANGES for c in range(lo, hi + 1)} | set(_EXTRA) | {c for c in text.vocab if len(c) == 1}
        chars = sorted(c for c in wanted if c.isspace() or unicodedata.category(c) not in ("Cc", "Cs", "Co", "Cn"))
        # what Piper sends: the code points of the characters' NFD; the composed letters are added as marks compose
        symbols = sorted({atom for c in chars for atom in unicodedata.normalize("NFD", c)})
        marks = sorted({c for c in symbols if unicodedata.combining(c)})
        index = {s: n for n, s in enumerate(symbols)}
        pairs: dict[tuple[str, str], str] = {}
        frontier, passes = [s for s in symbols if not unicodedata.combining(s)], 0
        while frontier:  # each round composes one more stacked mark
            new = []
            for base in frontier:
                for mark in marks:
                    composed = unicodedata.normalize("NFC", base + mark)
                    if len(composed) == 1:
                        pairs[base, mark] = composed
                        if composed not in index:
                            index[composed] = len(symbols)
                            symbols.append(composed)
                            new.append(composed)
            passes, frontier = passes + bool(new), new
        columns = {m: n + 1 for n, m in enumerate(sorted({m for _, m in pairs}))}
        compose = [[-1] * (len(columns) + 1) for _ in symbols]
        for (base, mark), composed in pairs.items():
            compose[index[base]][columns[mark]] = index[composed]
        mark_column = [columns.get(s, 0) for s in symbols]
        # Piper's input: every map key is a code point arriving in NFD; a precomposed one (from another runtime that
        # does not decompose) maps to its composed symbol directly
        id_map = {c: index[c] for c in chars if c in index}

        reads = [cls._reads(text, s) for s in symbols]
        tokens = sorted({t for r in reads for t in r})
        token_index = {t: n for n, t in enumerate(tokens)}
        width = max(1, *(len(r) for r in reads))
        expand = [[token_index[t] for t in r] + [-1] * (width - len(r)) for r in reads]
        vocab = text.vocab
        alone = [text._punctuation(t) for t in tokens]  # a token's reading when no letter stands beside it
        token_id = [vocab[" "] if a.isspace() else vocab.get(a, -1) if a else -1 for a in alone]
        return cls(
            symbols=symbols, id_map=id_map, compose=compose, mark_column=mark_column,
            combining=[unicodedata.combining(s) for s in symbols], passes=passes, expand=expand,
            tokens=tokens, token_id=token_id, letter=[bool(_LETTER.fullmatch(t)) for t in tokens],
            apostrophe=[t in _APOSTROPHES and "'" in vocab for t in tokens], hyphen=[t == "-" and "-" in vocab for t in tokens],
            apostrophe_id=vocab.get("'", -1), hyphen_id=vocab.get("-", -1), space_id=vocab[" "], add_blank=text.add_blank,
        )

    @staticmethod
    def _reads(text: FinnishText, symbol: str) -> str:
        """What :meth:`FinnishText._spoken` makes of ``symbol`` before its context-dependent punctuation step."""
        if symbol.isdigit() and symbol in "0123456789":
            return f" {_DIGITS[int(symbol)]} "
        return "".join(text._letter(ch) for ch in symbol.lower())


class PiperGraph(nn.Module):
    """Piper's ids in, audio out: fintts's reading of the text (module docstring), then ``VitsSynthesizer``."""

    def __init__(self, vits: VitsModel, tables: PiperTables):
        super().__init__()
        self.synthesizer = VitsSynthesizer(vits)
        self.passes, self.add_blank = tables.passes, tables.add_blank
        self.columns = len(tables.compose[0])
        for name, values, dtype in (
            ("compose", tables.compose, torch.long), ("mark_column", tables.mark_column, torch.long),
            ("combining", tables.combining, torch.long),
            ("expand", tables.expand, torch.long), ("token_id", tables.token_id, torch.long), ("letter", tables.letter, torch.bool),
            ("apostrophe", tables.apostrophe, torch.bool), ("hyphen", tables.hyphen, torch.bool),
        ):
            self.register_buffer(name, torch.tensor(values, dtype=dtype), persistent=False)
        self.apostrophe_id, self.hyphen_id, self.space_id = tables.apostrophe_id, tables.hyphen_id, tables.space_id

    def forward(self, input: Tensor, input_lengths: Tensor, scales: Tensor, sid: Tensor | None = None) -> Tensor:  # noqa: A002
        ids = self.text_ids(input, input_lengths)[None]
        synthesizer = self.synthesizer
        speaker = synthesizer.speaker(sid)
        duration_noise = torch.randn_like(ids.unsqueeze(1).repeat(1, 2, 1).float()) * scales[2]
        means, log_std, _ = synthesizer.prior(ids, duration_noise, scales[1:2], speaker)
        return synthesizer.decode(means, log_std, torch.randn_like(means) * scales[0], speaker).unsqueeze(0)  # [1, 1, samples]

    def text_ids(self, input: Tensor, input_lengths: Tensor) -> Tensor:  # noqa: A002
        """The voice's ids ``[T]`` (``FinnishText.encode``) of Piper's ``input [1, T']``."""
        given = _select(input[0], torch.arange(input.shape[1]) < input_lengths[0])
        symbols = given[2:-1:2]
        for _ in range(self.passes):
            symbols = self._compose(symbols)
        tokens = self.expand[symbols].reshape(-1)
        tokens = _select(tokens, tokens >= 0)
        ids = self._punctuate(tokens)
        ids = self._squeeze(_select(ids, ids >= 0))
        if not self.add_blank:
            return ids
        return torch.cat([torch.stack([torch.zeros_like(ids), ids], 1).reshape(-1), ids.new_zeros(1)])

    def _compose(self, symbols: Tensor) -> Tensor:
        """One round of NFC's canonical composition: each letter takes the first of the next :data:`_WINDOW` marks that
        composes with it and is not blocked (the mark before it has a lower combining class: NFD sorted them)."""
        n, none = symbols.shape[0], symbols.new_zeros(_WINDOW)
        column = torch.cat([self.mark_column[symbols], none])
        combining = torch.cat([self.combining[symbols], none])
        base, table = symbols * self.columns, self.compose.reshape(-1)
        result, found, eaten = symbols, torch.zeros_like(symbols, dtype=torch.bool), torch.zeros_like(symbols, dtype=torch.bool)
        marks_between = torch.ones_like(found)
        for offset in range(1, _WINDOW + 1):
            composed = table[base + column[offset:offset + n]]
            here = combining[offset:offset + n]
            unblocked = marks_between if offset == 1 else marks_between & (combining[offset - 1:offset - 1 + n] < here)
            take = (composed >= 0) & unblocked & ~found  # a mark is never a base: a letter's marks are no letter's
            result, found = torch.where(take, composed, result), found | take
            eaten = eaten | torch.cat([found.new_zeros(offset), take])[:n]
            marks_between = marks_between & (here > 0)
        return _select(result, ~eaten)

    def _punctuate(self, tokens: Tensor) -> Tensor:
        letter = self.letter[tokens]
        none = letter.new_zeros(1)
        inside = torch.cat([none, letter])[:-1] & torch.cat([letter, none])[1:]
        ids = self.token_id[tokens]
        ids = torch.where(self.apostrophe[tokens] & inside, torch.full_like(ids, self.apostrophe_id), ids)
        return torch.where(self.hyphen[tokens] & inside, torch.full_like(ids, self.hyphen_id), ids)

    def _squeeze(self, ids: Tensor) -> Tensor:
        space = ids == self.space_id
        word = (~space).long()
        seen = torch.cumsum(word, 0)
        before, after = seen - word > 0, seen[-1:] - seen > 0
        repeated = torch.cat([space.new_zeros(1), space])[:-1]
        return _select(ids, (word > 0) | (before & after & ~repeated))


def _select(values: Tensor, keep: Tensor) -> Tensor:
    """``values[keep]`` as ONNX ops with no boolean indexing: NonZero, then Gather."""
    return values.index_select(0, torch.nonzero(keep).reshape(-1))


def export_piper(vits: VitsModel, text: FinnishText, out: Path, *, speakers: Sequence[str] = (), dataset: str | None = None
                 ) -> list[Path]:
    """Write ``out`` (``NAME.onnx``) and ``NAME.onnx.json`` for ``vits`` (a float32 CPU model, folded in place: the caller's
    own copy, as :func:`fintts.tts.vits.export.export_folder` makes); returns the two files."""
    if not str(out).endswith(".onnx"):
        raise VoiceError(f"{out}: a Piper voice's file name ends in .onnx (its config is written beside it as .onnx.json)")
    model = fold_weight_norm(vits.eval())
    tables = PiperTables.build(text)
    graph = PiperGraph(model, tables).eval()
    config = model.config
    multi = config.num_speakers > 1
    probe = "^_" + "_".join(unicodedata.normalize("NFD", "Hyvää päivää!")) + "_$"
    feeds = (torch.tensor([[tables.id_map[c] for c in probe]]), torch.tensor([len(probe)]), torch.tensor([0.667, 1.0, 0.8]))
    names = ["input", "input_lengths", "scales"] + (["sid"] if multi else [])
    out.parent.mkdir(parents=True, exist_ok=True)
    config_file, partial = Path(f"{out}.json"), out.with_name(f".{out.name}.partial")  # a crash leaves no half voice
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation and tracer notes
        torch.onnx.export(
            graph, (*feeds, torch.tensor([0]))[: len(names)], str(partial), input_names=names, output_names=["output"],
            opset_version=_OPSET, dynamo=False, dynamic_axes={"input": {1: "phonemes"}, "output": {2: "samples"}},
        )
    partial.replace(out)
    partial.write_text(json.dumps(piper_config(model, tables, speakers, dataset or out.stem), ensure_ascii=False, indent=1),
                       encoding="utf-8")
    partial.replace(config_file)
    return [out, config_file]


def piper_config(vits: VitsModel, tables: PiperTables, speakers: Sequence[str], dataset: str) -> dict:
    """The ``.onnx.json`` Piper reads (``piper.config.PiperConfig.from_dict``) and Home Assistant lists the voice by."""
    config = vits.config
    names = list(speakers) if len(speakers) == config.num_speakers else [str(n) for n in range(config.num_speakers)]
    return {
        "dataset": dataset,
        "audio": {"sample_rate": config.sampling_rate},
        "espeak": {"voice": "fi"},
        "language": {"code": "fi_FI", "family": "fi", "region": "FI", "name_native": "suomi", "name_english": "Finnish",
                     "country_english": "Finland"},
        "inference": {"noise_scale": config.noise_scale, "length_scale": 1.0 / config.speaking_rate,
                      "noise_w": config.noise_scale_duration},
        "phoneme_type": "text",
        "phoneme_map": {},
        "phoneme_id_map": {c: [n] for c, n in tables.id_map.items()},
        "num_symbols": len(tables.symbols),
        "num_speakers": config.num_speakers,
        "speaker_id_map": {name: n for n, name in enumerate(names)} if config.num_speakers > 1 else {},
        "hop_length": math.prod(config.upsample_rates),
        "piper_version": "1.8.0",
        "fintts": {"note": "phoneme_type text: the graph reads written Finnish as fintts does (composition, case, punctuation); "
                           "numbers are read digit by digit, so write them as words"},
    }


def export_piper_folder(folder: Path, out: Path | None = None) -> list[Path]:
    """``fintts export --piper``, and the trainer's background export: the Piper voice of the voice saved in ``folder``
    (weights only from safetensors, torch's global generators untouched), by default ``folder/fi_FI-fintts.onnx``."""
    speakers_file = folder / SPEAKERS_FILE
    speakers = json.loads(speakers_file.read_text(encoding="utf-8")) if speakers_file.is_file() else []
    out = out or folder / PIPER_FILE
    return export_piper(load_saved(folder), FinnishText.from_folder(folder), out, speakers=speakers,
                        dataset=out.name.removesuffix(".onnx"))
