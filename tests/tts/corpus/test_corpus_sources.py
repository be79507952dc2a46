"""Corpora as their sources publish them — CSS10, Common Voice, audiofolder, Kaldi, a Hub dataset — read as they come.

Each is generated small (espeak-ng voices; mp3 and opus through ffmpeg) in its source's own layout and
read through ``fintts check``/``fintts speakers`` as a person would: every clip and speaker found, every bad
row named, and a few training steps on each.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import corpus_sources as sources
from fintts.tts.corpus import CorpusError, check_corpus, read_corpus
from hub_helpers import TOKEN
from trainer_helpers import cli, in_process
from vits_helpers import TRAINING_ONLY, tiny_config

#: every test here starts a process (a fintts command, a server's session, espeak-ng or ffmpeg): not the unit tier
pytestmark = pytest.mark.process

DATASET = "fintts-tester/fi-speech"
HUB_DATA = f"hf://datasets/{DATASET}"


@pytest.fixture(scope="session")
def folders(tmp_path_factory) -> dict[str, tuple[Path, sources.Expected]]:
    """The four folder layouts, built once for the session."""
    base = tmp_path_factory.mktemp("sources")
    kaldi_data, kaldi_expected = sources.kaldi(base / "kaldi-recipe")
    return {
        "css10": (base / "css10_fi", sources.css10(base / "css10_fi")),
        "commonvoice": (base / "cv-corpus" / "fi", sources.commonvoice(base / "cv-corpus" / "fi")),
        "audiofolder": (base / "my-dataset", sources.audiofolder(base / "my-dataset")),
        "kaldi": (kaldi_data, kaldi_expected),
    }


@pytest.fixture
def hub_dataset(hub_env, tmp_path) -> sources.Expected:
    """A parquet dataset with an Audio column on the local Hub, as ``push_to_hub`` leaves one."""
    expected = sources.hub_parquet(tmp_path / "parquet" / "train.parquet")
    sources.publish_dataset(hub_env, DATASET, tmp_path / "parquet" / "train.parquet", TOKEN)
    return expected


def _check_json(data: str, tmp_path: Path, *options: str) -> dict:
    # a Hub dataset in a process of its own: huggingface_hub reads HF_ENDPOINT (the local Hub's) once, at import
    run = cli if data == HUB_DATA else in_process
    result = run("check", data, "--json", "--no-progress", "--cache", str(tmp_path / "cache"), *options, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout)


def _assert_read_as_published(report: dict, expected: sources.Expected, format: str) -> None:
    assert report["format"] == format
    assert report["clips"] == len(expected.clips) and report["hours"] > 0
    assert {s["name"]: s["clips"] for s in report["speakers"]} == {
        name: list(expected.clips.values()).count(name) for name in expected.speakers
    }
    problems = "\n".join(f"{p['path']}: {p['reason']}" for p in report["problems"])
    for word in expected.bad:
        assert word in problems, f"{word} not named among the problems:\n{problems}"
    assert len(report["problems"]) == len(expected.bad), problems


@pytest.mark.parametrize("layout", ["css10", "commonvoice", "audiofolder", "kaldi"])
def test_check_and_speakers_read_each_source_as_published(folders, layout, tmp_path):
    root, expected = folders[layout]
    report = _check_json(str(root), tmp_path)
    _assert_read_as_published(report, expected, layout)
    assert report["looked_for"].startswith(f"detected {layout}:")
    text = in_process("check", str(root), "--no-progress", cwd=tmp_path)
    assert text.stdout.splitlines()[0].startswith(f"Format: {layout} — detected {layout}:"), text.stdout
    speakers = in_process("speakers", str(root), "--json", "--no-progress", cwd=tmp_path)
    assert speakers.returncode == 0, speakers.stderr
    listed = json.loads(speakers.stdout)
    assert {s["name"]: s["clips"] for s in listed["speakers"]} == {s["name"]: s["clips"] for s in report["speakers"]}
    assert listed["best"] in expected.speakers


def test_a_hub_dataset_is_downloaded_and_read_from_its_parquet(hub_dataset, tmp_path):
    report = _check_json(HUB_DATA, tmp_path)
    _assert_read_as_published(report, hub_dataset, "hub")
    assert "split train" in report["looked_for"]
    assert Path(report["root"]).is_relative_to(tmp_path / "cache")
    speakers = cli("speakers", HUB_DATA, "--json", "--no-progress", "--cache", str(tmp_path / "cache"), cwd=tmp_path)
    assert speakers.returncode == 0 and {s["name"] for s in json.loads(speakers.stdout)["speakers"]} == {"0", "1"}
    other = cli("check", HUB_DATA, "--split", "test", "--no-progress", "--cache", str(tmp_path / "cache"), cwd=tmp_path)
    assert other.returncode == 2 and "no parquet files of split 'test'" in other.stderr and "train-00000" in other.stderr
    columns = cli("check", HUB_DATA, "--text-column", "lause", "--no-progress", "--cache", str(tmp_path / "cache"), cwd=tmp_path)
    assert columns.returncode == 2 and "lause" in columns.stderr and "transcription" in columns.stderr


def test_common_voice_reads_validated_by_default_other_splits_on_request_never_invalidated(folders, tmp_path):
    root, expected = folders["commonvoice"]
    corpus = read_corpus(root)
    assert "common_voice_fi_40000" not in {i.id for i in corpus.items}  # only in invalidated.tsv
    quoted = next(i for i in corpus.items if i.id == "common_voice_fi_30001")
    assert quoted.text == 'Hän sanoi "juna lähtee" ja lähti.'  # the sentence as given, quotes and all
    train = _check_json(str(root), tmp_path, "--split", "train")
    assert train["clips"] == 2 and "read train.tsv" in train["looked_for"]
    refused = in_process("check", str(root), "--split", "invalidated", "--no-progress", cwd=tmp_path)
    assert refused.returncode == 2 and "rejected" in refused.stderr
    # two client_ids sharing their first 8 digits are shown longer, so speakers stay apart
    assert len({i.speaker for i in corpus.items}) == 3 and all(len(i.speaker) == 16 for i in corpus.items)


def test_kaldi_segments_are_cut_from_recordings_and_pipes_are_never_run(folders):
    root, expected = folders["kaldi"]
    report = check_corpus(root, progress=False)
    spans = {i.id: i.span for i in report.items}
    assert all(span is not None and span[1] > span[0] for span in spans.values())
    assert {i.audio.name for i in report.items} == {"rec0.wav", "rec1.wav"}  # relative to the recipe folder
    # each segment is its own stretch: the first of each recording is the length of its sentence alone
    assert all(abs(report.durations[u] - (spans[u][1] - spans[u][0])) < 0.02 for u in spans)
    assert not (root.parent.parent / "pipe-ran").exists()
    pipe = next(str(p) for p in report.problems if "rec9" in str(p))
    assert "command" in pipe and "does not run" in pipe


def test_kaldi_without_segments_or_utt2spk_reads_whole_recordings_from_absolute_paths(folders, tmp_path):
    recipe = folders["kaldi"][0].parent.parent
    data = tmp_path / "plain"
    data.mkdir()
    (data / "wav.scp").write_text(f"a {recipe / 'audio' / 'rec0.wav'}\nb\t{recipe / 'audio' / 'rec1.wav'}\n"
                                  f"c /nowhere/c.wav\nd {recipe / 'audio' / 'rec0.wav'}.ark:17\n", encoding="utf-8")
    (data / "text").write_text("a Ensimmäinen tallenne.\nb\tToinen tallenne.\nc Kolmas.\nd Neljäs.\ne Viides.\n",
                               encoding="utf-8")
    corpus = read_corpus(data)
    assert corpus.format == "kaldi"
    assert {(i.id, i.speaker, i.span) for i in corpus.items} == {("a", "plain", None), ("b", "plain", None)}
    problems = "\n".join(map(str, corpus.problems))
    assert "c audio not found" in problems and "d is a pipe or an archive offset" in problems
    assert "no recording e" in problems


def test_a_common_voice_copy_without_validated_tsv_reads_train(folders, tmp_path):
    source, _ = folders["commonvoice"]
    root = tmp_path / "fi"
    shutil.copytree(source, root)
    (root / "validated.tsv").unlink()
    report = _check_json(str(root), tmp_path)
    assert report["clips"] == 2 and "read train.tsv" in report["looked_for"]


def test_audiofolder_is_not_taken_for_ljspeech_and_decodes_every_format_at_its_rate(folders):
    root, expected = folders["audiofolder"]
    report = check_corpus(root, sample_rate=16000, progress=False)
    assert report.format == "audiofolder"
    assert {i.audio.suffix for i in report.items} == {".ogg", ".opus", ".wav", ".flac"}
    assert dict(report.sample_rates) == {44100: 1, 48000: 1, 24000: 1, 16000: 1}
    assert next(i for i in report.items if i.audio.name == "a.ogg").text == sources.SENTENCES[0]  # its commas kept


def test_an_audiofolder_with_metadata_jsonl_and_split_folders_is_read_one_split_at_a_time(folders, tmp_path):
    source, expected = folders["audiofolder"]
    root = tmp_path / "dataset"
    for split in ("train", "test"):
        shutil.copytree(source / "data", root / split / "data")
    rows = [{"file_name": f"{rel}{Path(a.audio).suffix}", "sentence": a.text, "speaker": a.speaker}
            for rel, a in ((i.id, i) for i in read_corpus(source).items)]
    lines = [json.dumps(row, ensure_ascii=False) for row in rows]
    (root / "train" / "metadata.jsonl").write_text("\n".join([*lines, "{not json"]) + "\n", encoding="utf-8")
    (root / "test" / "metadata.jsonl").write_text(lines[0] + "\n", encoding="utf-8")
    train = _check_json(str(root), tmp_path)
    assert train["format"] == "audiofolder" and train["clips"] == len(expected.clips)
    assert [p["reason"][:7] for p in train["problems"]] == ["line 5:"] and "train/metadata.jsonl" in train["looked_for"]
    assert _check_json(str(root), tmp_path, "--split", "test")["clips"] == 1


def test_a_forced_format_that_does_not_fit_says_what_it_needs(folders, tmp_path):
    root, _ = folders["css10"]
    for layout, needs in (("kaldi", "wav.scp"), ("commonvoice", "validated.tsv"), ("audiofolder", "file_name")):
        with pytest.raises(CorpusError, match=needs):
            read_corpus(root, layout)
    forced = in_process("check", str(root), "--format", "css10", "--json", "--no-progress", cwd=tmp_path)
    assert json.loads(forced.stdout)["looked_for"].startswith("format css10 as given")
    unknown = in_process("check", str(root), "--format", "csv", "--no-progress", cwd=tmp_path)
    assert unknown.returncode == 2 and "css10" in unknown.stderr and "kaldi" in unknown.stderr


def test_a_release_unpacked_one_folder_up_is_pointed_to_its_corpus(folders, tmp_path):
    root, _ = folders["commonvoice"]  # cv-corpus/fi, as Common Voice's archives unpack
    result = in_process("check", str(root.parent), "--no-progress", cwd=tmp_path)
    assert result.returncode == 2 and f"{root} looks like commonvoice: pass that folder" in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["css10", "commonvoice", "audiofolder", "kaldi"])
def test_training_runs_a_few_steps_on_each_source(folders, layout, tmp_path):
    root, _ = folders[layout]
    config = tiny_config(tmp_path, data=str(root), speakers=[], max_steps=2, eval_every=2, heldout_per_speaker=1,
                         batch_size=2, **TRAINING_ONLY)
    result = in_process("train", str(config), "--store", str(tmp_path / "store"), "--no-progress", cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (tmp_path / "store" / "model" / "config.json").is_file()


@pytest.mark.slow
def test_training_runs_a_few_steps_on_a_hub_dataset(hub_dataset, tmp_path):
    config = tiny_config(tmp_path, data=HUB_DATA, speakers=[], max_steps=2, eval_every=2, heldout_per_speaker=1,
                         batch_size=2, **TRAINING_ONLY)
    result = cli("train", str(config), "--store", str(tmp_path / "store"), "--no-progress", cwd=tmp_path, timeout=400)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert list((tmp_path / "store").rglob("datasets/fintts-tester/fi-speech/*/train/*.flac"))  # the run's own cache
