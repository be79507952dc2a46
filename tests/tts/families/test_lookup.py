"""Which family a voice folder is: found by the families' own ``owns``, through their entry points, in this process."""

from __future__ import annotations

import pytest

from fintts.errors import UsageError
from fintts.tts.voice import find_voice
from fintts.tts.voice_format import VoiceError

FACES = '''
from fintts.tts.family import Family

def owns(folder):
    return (folder / "tone.json").is_file()

TONE = Family(name="tone", task="tone", owns=owns)
CLAIMS_TONES = Family(name="echo", task="echo", owns=owns)
'''


@pytest.fixture
def families(tmp_path, monkeypatch):
    """Two families, registered by a distribution's metadata on sys.path, that both claim a folder with tone.json."""
    site = tmp_path / "site"
    info = site / "fintts_tones-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fintts-tones\nVersion: 0\n")
    (site / "tone_faces.py").write_text(FACES)
    monkeypatch.syspath_prepend(str(site))
    return info


def test_a_run_folder_is_found_by_its_families_voice_and_a_folder_of_none_says_so(families, tmp_path):
    (families / "entry_points.txt").write_text("[fintts.families]\ntone = tone_faces:TONE\n")
    (tmp_path / "run" / "model").mkdir(parents=True)
    (tmp_path / "run" / "model" / "tone.json").write_text("{}")
    folder, family = find_voice(tmp_path / "run")
    assert folder == tmp_path / "run" / "model" and family.name == "tone"
    with pytest.raises(UsageError, match="offer no fintts say; what they offer: nothing"):
        family.operation("load_voice")
    (tmp_path / "empty").mkdir()
    with pytest.raises(VoiceError, match=r"empty is not a voice: no voice files in it or in .*empty/model"):
        find_voice(tmp_path / "empty")


def test_a_folder_two_families_claim_is_refused_with_both_names(families, tmp_path):
    (families / "entry_points.txt").write_text("[fintts.families]\ntone = tone_faces:TONE\necho = tone_faces:CLAIMS_TONES\n")
    (tmp_path / "tone.json").write_text("{}")
    with pytest.raises(VoiceError, match=r"a voice of several families \(echo, tone\)"):
        find_voice(tmp_path)
