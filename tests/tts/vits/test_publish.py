"""``fintts publish``: a trained run's voice at the root of a Hub repo of its own, against the local Hub.

The run is a tiny VITS trained a few steps on the demo corpus; the Hub is the stand-in server,
which the real ``huggingface_hub`` (and transformers through it) talks to.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
import torch
from huggingface_hub import HfApi, ModelCard
from safetensors.torch import load_file

from fintts.errors import ConfigError, StoreError
from fintts.train import train
from fintts.train.config import load_config
from fintts.train.run import checkpoint
from fintts.train.stores.hub import push
from fintts.tts.hub_voice import download_voice
from fintts.tts.vits.publish import publish
from fintts.tts.voice import load_voice
from hub_helpers import TOKEN
from trainer_helpers import QUIET, built_once, cli
from vits_helpers import tiny_config

#: every test here starts a process (a fintts command, a server's session, espeak-ng or ffmpeg): not the unit tier
pytestmark = pytest.mark.process

VOICE = "fintts-tester/my-voice"
RUN = "fintts-tester/my-run"
#: the voice's files at the repo's root: transformers', the tokenizer's, the speakers, the graphs, the Piper voice and the card
VOICE_FILES = {"config.json", "model.safetensors", "vocab.json", "tokenizer_config.json", "added_tokens.json", "speakers.json",
               "model.onnx", "model.int8.onnx", "fi_FI-fintts.onnx", "fi_FI-fintts.onnx.json", "README.md", ".gitattributes"}


@pytest.fixture(scope="session")
def run(tmp_path_factory):
    """A finished tiny run: checkpoints at steps 1 and 2, each validated; model/ is the better one's voice, with its graphs
    and Piper voice as the trainer writes them."""

    def build(folder):
        train(tiny_config(folder, max_steps=2, eval_every=1, checkpoint_every_steps=1), store=folder / "store", **QUIET)

    return built_once(tmp_path_factory, "publish", build) / "store"


def status_of(store):
    return json.loads((store / "status.json").read_text())


@pytest.mark.slow
def test_a_published_voice_speaks_through_transformers_pipeline_and_fintts(run, tmp_path, hub_env, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    result = cli("publish", "--store", str(run), "--hub-repo", VOICE, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert TOKEN not in result.stdout + result.stderr
    files = hub_env.files(VOICE)
    assert {f for f in files if "/" not in f} == VOICE_FILES  # the voice at the root, nothing of the run
    assert any(f.startswith("samples/") and f.endswith(".wav") for f in files)  # and a few of its validation samples
    # two speakers: the root speaks the first by default, all-speakers/ is the trained voice as it is
    assert files["all-speakers/model.safetensors"] == (run / "model" / "model.safetensors").read_bytes()
    assert json.loads(files["speakers.json"]) == ["espeak_f2"] and json.loads(files["config.json"])["num_speakers"] == 1
    assert "(private)" in result.stdout and "10 files" not in result.stdout  # a voice reproduces a person: private unless asked

    (tmp_path / "README.md").write_bytes(files["README.md"])
    card = ModelCard.load(tmp_path / "README.md")
    status = status_of(run)
    assert card.data.pipeline_tag == "text-to-speech" and card.data.language == ["fi"] and card.data.license == "apache-2.0"
    assert card.data.library_name == "transformers" and card.data.base_model is None  # from scratch: no base model
    mcd = card.data.eval_results[0]
    assert mcd.metric_type == "mcd" and mcd.metric_value == round(status["best"]["value"], 3)
    assert f"**Hours:** {status['about']['hours']:.3f}" in card.text and "**Speakers:** 2 (espeak_f2, espeak_m3)" in card.text
    assert f'pipeline("text-to-speech", model="{VOICE}")' in card.text and f"--hub-repo {VOICE}" in card.text

    speak = ("import json, numpy; from transformers import pipeline\n"
             f"speech = pipeline('text-to-speech', model='{VOICE}')('hyvää huomenta')\n"
             "print(json.dumps([speech['sampling_rate'], int(numpy.asarray(speech['audio']).size)]))")
    spoken = subprocess.run([sys.executable, "-c", speak], capture_output=True, text=True, cwd=tmp_path, timeout=240)
    assert spoken.returncode == 0, spoken.stderr
    rate, samples = json.loads(spoken.stdout.strip().splitlines()[-1])
    assert rate == 16000 and samples > 1000

    folder = download_voice(VOICE, tmp_path / "laptop", endpoint=hub_env.endpoint, token=TOKEN)  # fintts say --hub-repo's way
    assert folder == tmp_path / "laptop"  # the repo's root is the voice
    waveform, rate = load_voice(folder, backend="onnx").synthesize("Kello on 7.30.")
    assert rate == 16000 and waveform.size > 1000
    print(f"published repo: {sum(map(len, files.values()))} bytes in {len(files)} files")


def test_a_republish_replaces_the_voice_in_one_commit_and_removes_stale_files(run, hub):
    status = status_of(run)
    other = next(e["step"] for e in status["evals"] if e["step"] != status["best"]["step"])  # not the best voice's step
    publish(run, VOICE, endpoint=hub.endpoint, token=TOKEN, onnx=False)
    api = HfApi(endpoint=hub.endpoint, token=TOKEN)
    api.upload_file(path_or_fileobj=b"stale", path_in_repo="old/voice.onnx", repo_id=VOICE)
    commits = len(hub.commits(VOICE))

    published = publish(run, VOICE, checkpoint=f"step-{other}", endpoint=hub.endpoint, token=TOKEN, onnx=False)
    # one commit; the stale file goes, and so do the best voice's graphs and Piper voice: not of this checkpoint's
    # weights (and onnx=False makes none for it)
    assert len(hub.commits(VOICE)) == commits + 1
    graphs = ["fi_FI-fintts.onnx", "fi_FI-fintts.onnx.json", "model.int8.onnx", "model.onnx"]
    assert sorted(published.removed) == [f"all-speakers/{g}" for g in graphs] + ["old/voice.onnx"]
    files = hub.files(VOICE)
    assert "old/voice.onnx" not in files and "model.safetensors" in files
    weights = load_file(run / checkpoint.CHECKPOINTS / checkpoint.name_for_step(other) / "model.safetensors")
    (hub.root / "w.safetensors").write_bytes(files["all-speakers/model.safetensors"])
    voice = load_file(hub.root / "w.safetensors")
    assert voice.keys() == {k.removeprefix("model.") for k in weights}
    assert all(torch.equal(voice[k.removeprefix("model.")], v) for k, v in weights.items())  # the checkpoint's own weights
    card = files["README.md"].decode()
    figures = next(e for e in status["evals"] if e["step"] == other)
    assert f"{figures['val/mcd']:.3f} (held-out clips, step {other})" in card  # that checkpoint's figures, not the best's

    again = publish(run, VOICE, checkpoint=f"step-{other}", endpoint=hub.endpoint, token=TOKEN, onnx=False)
    assert again.commit is None and len(hub.commits(VOICE)) == commits + 1  # nothing changed: no commit


def test_private_creates_a_private_repo_and_a_public_one_is_not_silently_kept(run, hub):
    published = publish(run, "fintts-tester/secret", private=True, endpoint=hub.endpoint, token=TOKEN, onnx=False)
    api = HfApi(endpoint=hub.endpoint, token=TOKEN)
    assert published.private and api.model_info("fintts-tester/secret").private
    publish(run, VOICE, private=False, endpoint=hub.endpoint, token=TOKEN, onnx=False)  # asked for: public
    head = hub.head(VOICE)
    with pytest.raises(StoreError, match="is public"):
        publish(run, VOICE, private=True, endpoint=hub.endpoint, token=TOKEN, onnx=False)
    assert hub.head(VOICE) == head and not api.model_info(VOICE).private


def test_an_existing_public_repo_is_refused_unless_public_was_asked_for(run, tmp_path, hub_env):
    # issue 52, item 5: without --public, a voice went into an existing public repo ("PUBLIC: anyone can download it")
    api = HfApi(endpoint=hub_env.endpoint, token=TOKEN)
    api.create_repo(VOICE, private=False)
    api.upload_file(path_or_fileobj=b"someone's notes\n", path_in_repo="notes.md", repo_id=VOICE)
    head = hub_env.head(VOICE)
    refused = cli("publish", "--store", str(run), "--hub-repo", VOICE, "--no-onnx", cwd=tmp_path)
    assert refused.returncode == 4, refused.stdout + refused.stderr  # EXIT_STORE
    assert f"{VOICE} is public" in refused.stderr and "--public" in refused.stderr and "nothing was published" in refused.stderr
    assert "PUBLIC" not in refused.stdout + refused.stderr
    assert hub_env.head(VOICE) == head and set(hub_env.files(VOICE)) == {".gitattributes", "notes.md"}
    asked = cli("publish", "--store", str(run), "--hub-repo", VOICE, "--no-onnx", "--public", cwd=tmp_path)
    assert asked.returncode == 0, asked.stdout + asked.stderr
    assert "PUBLIC: anyone can download it" in asked.stderr and "(public)" in asked.stdout
    assert "notes.md" not in hub_env.files(VOICE) and "model.safetensors" in hub_env.files(VOICE)


def test_a_missing_token_is_a_clear_error(run, tmp_path, hub_env, monkeypatch):
    monkeypatch.delenv("HF_TOKEN")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "no-login"))  # no cached `hf auth login` either
    result = cli("publish", "--store", str(run), "--hub-repo", VOICE, cwd=tmp_path)
    assert result.returncode == 4, result.stdout + result.stderr
    assert "write token" in result.stderr and "HF_TOKEN" in result.stderr and "Traceback" not in result.stderr
    assert not any(r.path.startswith("/api/repos/create") for r in hub_env.requests)


def test_a_hub_run_is_published_from_hf_and_never_published_over(run, tmp_path, hub):
    store = tmp_path / "store"
    shutil.copytree(run, store)
    push(store, RUN, endpoint=hub.endpoint, token=TOKEN)
    before = hub.files(RUN)

    published = publish(f"hf://{RUN}", VOICE, checkpoint="latest", endpoint=hub.endpoint, token=TOKEN, onnx=False)
    assert published.voice == f"step-00000002 of hf://{RUN}"
    assert {"config.json", "model.safetensors", "README.md"} <= set(hub.files(VOICE))
    assert not [r for r in hub.requests if "optim.pt" in r.path]  # weights only: no optimizer state downloaded

    with pytest.raises(StoreError, match="holds a fintts run"):
        publish(f"hf://{RUN}", RUN, endpoint=hub.endpoint, token=TOKEN, onnx=False)
    assert hub.files(RUN) == before


def test_the_licence_is_the_base_models_or_the_configs(tmp_path, run):
    assert load_config(tiny_config(tmp_path, license="mit")).task.license == "mit"
    with pytest.raises((ConfigError, ValueError), match="cc-by-nc-4.0"):
        load_config(tiny_config(tmp_path, init="facebook/mms-tts-fin", model={}, license="mit"))
    card = ModelCard.load(run / "model" / "README.md")  # the exported folder's card: the same writer
    assert card.data.pipeline_tag == "text-to-speech" and card.data.license == "apache-2.0" and "fintts say" in card.text


def test_a_new_repo_is_private_unless_asked_hidden_files_stay_home_and_an_unvalidated_voice_is_not_the_best(run, hub, tmp_path):
    store = tmp_path / "store"
    shutil.copytree(run, store)
    (store / "model" / ".cache").mkdir()
    (store / "model" / ".cache" / "token").write_text("hf_secret")
    (store / "model" / "extra").mkdir()
    (store / "model" / "extra" / ".notes.swp").write_text("private notes")
    status = status_of(store)
    status.pop("best", None)
    status["evals"] = []
    (store / "status.json").write_text(json.dumps(status))
    said = []
    published = publish(store, "fintts-tester/fresh", endpoint=hub.endpoint, token=TOKEN, onnx=False, say=said.append)
    assert published.private and HfApi(endpoint=hub.endpoint, token=TOKEN).model_info("fintts-tester/fresh").private
    files = hub.files("fintts-tester/fresh")
    assert not any(part.startswith(".") for path in files if path != ".gitattributes" for part in path.split("/")), sorted(files)
    assert "never validated" in published.voice and "best" not in published.voice
    announced = next(m for m in said if m.startswith("publishing "))
    assert "never validated" in announced and "private" in announced and "model.safetensors" in announced


def test_a_public_card_names_no_local_path_and_carries_validation_samples(run, hub, tmp_path):
    store = tmp_path / "store"
    shutil.copytree(run, store)
    status = status_of(store)
    status["about"] = {**status["about"], "init": "/home/pekka/models/my-base-voice", "data": "/home/pekka/corpora/my-voice"}
    (store / "status.json").write_text(json.dumps(status))
    publish(store, "fintts-tester/clean", private=False, endpoint=hub.endpoint, token=TOKEN, onnx=False)
    files = hub.files("fintts-tester/clean")
    card = files["README.md"].decode()
    assert "/home/pekka" not in card, card
    (tmp_path / "README.md").write_text(card)
    data = ModelCard.load(tmp_path / "README.md").data
    assert data.base_model is None and data.eval_results[0].dataset_name == "my-voice"
    samples = sorted(f for f in files if f.startswith("samples/"))
    assert 1 <= len(samples) <= 4 and all(f"/resolve/main/{s}" in card for s in samples) and "<audio controls" in card


def test_a_voice_of_several_speakers_speaks_its_chosen_one_without_speaker_id(run, hub, tmp_path):
    from transformers import VitsModel

    publish(run, "fintts-tester/two", private=False, endpoint=hub.endpoint, token=TOKEN, onnx=False, speaker="espeak_m3")
    files = hub.files("fintts-tester/two")
    for rel, data in files.items():
        (tmp_path / "repo" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "repo" / rel).write_bytes(data)
    root = VitsModel.from_pretrained(tmp_path / "repo").eval()
    full = VitsModel.from_pretrained(tmp_path / "repo" / "all-speakers").eval()
    ids = torch.tensor([[5, 9, 12, 7, 20, 3, 14]])
    with torch.no_grad():
        torch.manual_seed(11)
        chosen = full(input_ids=ids, speaker_id=1).waveform  # espeak_m3 is the second speaker
        torch.manual_seed(11)
        default = root(input_ids=ids).waveform  # what pipeline("text-to-speech") does: no speaker_id
        torch.manual_seed(11)
        nobody = full(input_ids=ids).waveform
    assert default.shape == chosen.shape and torch.allclose(default, chosen, atol=1e-5), (default - chosen).abs().max()
    # without speaker_id the full voice is another sound (on this 2-step voice, a slight one: still far above rounding)
    assert nobody.shape != chosen.shape or (nobody - chosen).abs().max() > 20 * (default - chosen).abs().max()
    card = files["README.md"].decode()
    assert "speaks **espeak_m3**" in card and 'subfolder="all-speakers"' in card and "speaker_id=" in card
