"""Finnish normalisation, and ids that agree with transformers' VitsTokenizer."""

from pathlib import Path

import pytest
from transformers import VitsTokenizer

from fintts.tts.text import FALLBACK_VOCAB, FinnishText, split_sentences

SENTENCES = [
    "Kissa kävelee kadulla klo 14.30.",
    "Akka ja kukko kiekuvat 22.11.2026 kello 6.",
    "Vaa’an EU-maa maksoi 12,50 € (n. 5 %).",
    "  Öisin  käy   ”kummia” – esim. Åke!  ",
]


@pytest.fixture
def text() -> FinnishText:
    return FinnishText.default()


@pytest.mark.parametrize(
    ("written", "spoken"),
    [
        ("Minulla on 3 kissaa.", "minulla on kolme kissaa"),
        ("Tuli 10 000 ihmistä", "tuli kymmenentuhatta ihmistä"),
        ("Puh. 040", "puhelin nolla neljä nolla"),
        ("Lämpötila -5 °C", "lämpötila miinus viisi astetta"),
        ("Tänään on 3. päivä.", "tänään on kolmas päivä"),
        ("Hän tuli 3. Sitten lähti.", "hän tuli kolme sitten lähti"),
        ("22. marraskuuta", "kahdeskymmenestoinen marraskuuta"),
        ("22.11.2026", "kahdeskymmenestoinen marraskuuta kaksituhatta kaksikymmentäkuusi"),
        ("Syntyi 1.5.", "syntyi ensimmäisenä toukokuuta"),
        ("klo 14.30", "kello neljätoista kolmekymmentä"),
        ("Klo 9 alkaa", "kello yhdeksän alkaa"),
        ("14:05", "neljätoista nolla viisi"),
        ("Juna lähtee 9.45.", "juna lähtee yhdeksän neljäkymmentäviisi"),
        ("3,5 ja 3,05", "kolme pilkku viisi ja kolme pilkku nolla viisi"),
        ("5 % ja 1,5%", "viisi prosenttia ja yksi pilkku viisi prosenttia"),
        ("12,50 € tai 1 €", "kaksitoista euroa viisikymmentä senttiä tai yksi euro"),
        ("n. 5 km", "noin viisi kilometriä"),
        ("80 km/h", "kahdeksankymmentä kilometriä tunnissa"),
        ("1990-luvulla", "tuhat yhdeksänsataayhdeksänkymmentäluvulla"),
        ("Esim. omenat jne.", "esimerkiksi omenat ja niin edelleen"),
        ("Ks. mm. prof. Virtanen ja tri Laine", "katso muun muassa professori virtanen ja tohtori laine"),
        ("tms. yms.", "tai muuta sellaista ynnä muuta sellaista"),
        ("”Hei”, hän sanoi – ja lähti…", "hei hän sanoi ja lähti"),
        ("«Niin» — ehkä", "niin ehkä"),
        ("vaa’an EU-maa", "vaa'an eu-maa"),
        ("Müller, Øresund, café", "myller öresund cafe"),
        ("  Paljon \t välejä\n ja  rivejä ", "paljon välejä ja rivejä"),
        ("HUUTO", "huuto"),
    ],
)
def test_normalize_reads_finnish_aloud(text: FinnishText, written: str, spoken: str) -> None:
    assert text.normalize(written) == spoken


def test_unknown_characters_are_reported_and_dropped_with_a_warning(text: FinnishText) -> None:
    warnings: list[str] = []

    ids = text.encode("Привет hei ☃", warn=warnings.append)

    assert text.unknown_chars("Привет hei ☃") == set("привет") | {"☃"}
    assert text.normalize("Привет hei ☃") == "hei"
    assert ids == text.encode("hei")
    assert len(warnings) == 1 and "'☃'" in warnings[0] and "'п'" in warnings[0]


def test_known_text_warns_nothing(text: FinnishText) -> None:
    warnings: list[str] = []
    text.encode("Hyvää huomenta, 5 kissaa!", warn=warnings.append)
    assert text.unknown_chars("Hyvää huomenta, 5 kissaa!") == set()
    assert warnings == []


def test_encode_intersperses_the_blank(text: FinnishText) -> None:
    ids = text.encode("Ai!")
    assert ids == [0, FALLBACK_VOCAB["a"], 0, FALLBACK_VOCAB["i"], 0]
    assert FinnishText(FALLBACK_VOCAB, add_blank=False).encode("Ai!") == [FALLBACK_VOCAB["a"], FALLBACK_VOCAB["i"]]


def _mms_like_vocab() -> dict[str, int]:
    """Like MMS: a real letter ('k') at id 0, doubling as the blank."""
    symbols = sorted((s for s in FALLBACK_VOCAB if s != "_"), key=lambda s: (s != "k", s))
    return {symbol: index for index, symbol in enumerate(symbols)}


@pytest.mark.parametrize("vocab", [FALLBACK_VOCAB, _mms_like_vocab()], ids=["fallback", "letter-at-0"])
def test_saved_tokenizer_gives_encode_ids(vocab: dict[str, int], tmp_path: Path) -> None:
    text = FinnishText(vocab)
    text.save_tokenizer(tmp_path)
    tokenizer = VitsTokenizer.from_pretrained(tmp_path)

    for sentence in SENTENCES:
        assert tokenizer(text.normalize(sentence)).input_ids == text.encode(sentence), sentence

    again = FinnishText.from_tokenizer(tokenizer)
    assert again.vocab == vocab and again.add_blank and again.vocab_size == len(vocab)
    without_transformers = FinnishText.from_folder(tmp_path)  # what a torch-free laptop reads
    assert without_transformers.vocab == again.vocab and without_transformers.add_blank == again.add_blank


def test_a_folder_without_a_vocabulary_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="vocab.json not found"):
        FinnishText.from_folder(tmp_path)
    (tmp_path / "vocab.json").write_text("{not json")
    with pytest.raises(ValueError, match="vocab.json is not valid JSON"):
        FinnishText.from_folder(tmp_path)


def test_saved_tokenizer_drives_the_text_to_speech_pipeline(tmp_path: Path) -> None:
    from transformers import VitsConfig, VitsModel, pipeline

    text = FinnishText(_mms_like_vocab())
    tiny = VitsConfig(
        vocab_size=text.vocab_size, hidden_size=16, num_hidden_layers=1, num_attention_heads=1, ffn_dim=16,
        flow_size=16, spectrogram_bins=33, upsample_initial_channel=16, upsample_rates=[4, 4],
        upsample_kernel_sizes=[8, 8], resblock_kernel_sizes=[3], resblock_dilation_sizes=[[1]],
        posterior_encoder_num_wavenet_layers=1, prior_encoder_num_flows=1, prior_encoder_num_wavenet_layers=1,
        duration_predictor_filter_channels=16, duration_predictor_num_flows=1, depth_separable_num_layers=1,
    )
    VitsModel(tiny).save_pretrained(tmp_path)
    text.save_tokenizer(tmp_path)

    speech = pipeline("text-to-speech", model=str(tmp_path))(text.normalize("Hyvää huomenta"))

    assert speech["sampling_rate"] == tiny.sampling_rate and speech["audio"].size > 0


def test_bad_vocabularies_are_refused() -> None:
    with pytest.raises(ValueError, match="id 0"):
        FinnishText({"a": 1, " ": 2})
    with pytest.raises(ValueError, match="space"):
        FinnishText({"a": 0, "b": 1})
    with pytest.raises(ValueError, match="same id"):
        FinnishText({"a": 0, " ": 0})


def test_split_sentences_keeps_abbreviations_initials_dates_and_decimals_whole():
    chunks = split_sentences("Esim. Matti tuli klo 14.30. Hän toi n. 5 kg omenoita! J. Sibelius sävelsi 3. sinfonian?\n"
                             "Otsikko\nHinta on 12,50 €.\n\nUusi kappale alkaa. 2026 oli hyvä vuosi")
    assert [(c.text, c.boundary) for c in chunks] == [
        ("Esim. Matti tuli klo 14.30.", "sentence"),
        ("Hän toi n. 5 kg omenoita!", "sentence"),
        ("J. Sibelius sävelsi 3. sinfonian?", "sentence"),
        ("Otsikko", "sentence"),
        ("Hinta on 12,50 €.", "paragraph"),
        ("Uusi kappale alkaa.", "sentence"),
        ("2026 oli hyvä vuosi", "end"),
    ]


def test_a_page_or_birth_abbreviation_before_a_number_does_not_end_the_sentence():
    chunks = split_sentences("Katso s. 12–15. Sibelius (s. 8.12.1865) sävelsi paljon. Luin kirjan s. 5 asti.")
    assert [c.text for c in chunks] == ["Katso s. 12–15.", "Sibelius (s. 8.12.1865) sävelsi paljon.", "Luin kirjan s. 5 asti."]
    assert FinnishText.default().normalize(chunks[0].text) == "katso sivut kahdestatoista viiteentoista"


def test_split_sentences_cuts_long_sentences_at_commas_then_spaces():
    long = ", ".join(f"sana{n} toinen{n}" for n in range(40)) + "."
    chunks = split_sentences(long, max_chars=100)
    assert all(len(c.text) <= 100 for c in chunks) and len(chunks) > 3
    assert all(c.boundary == "clause" and c.text.endswith(",") for c in chunks[:-1]) and chunks[-1].boundary == "end"
    assert " ".join(c.text for c in chunks) == long
    unbroken = split_sentences("a" * 250, max_chars=100)
    assert [len(c.text) for c in unbroken] == [100, 100, 50]
    assert split_sentences("  \n\n ") == []
