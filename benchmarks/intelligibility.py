"""Does a demo voice say the right words? Sentence identification against espeak-ng.

    python benchmarks/intelligibility.py runs/demo/model --speaker espeak_m3 --json out.json

Nobody can listen inside CI, and there is no Finnish ASR model offline, so this measures a
proxy: the voice says N sentences that no speaker of the demo corpus trained on, espeak-ng
says the same N sentences with the speaker's own settings (the voice the demo imitates),
and each synthesised sentence is matched to the espeak-ng rendering it is nearest to by
MCD with DTW (:func:`fintts.tts.eval.nearest_reference`). A voice whose sounds follow the
text picks its own sentence; a buzz, a mumble or a voice that only got the timbre right
scores near chance (``1/N``). It says nothing about naturalness.

Needs espeak-ng (``apt-get install -y espeak-ng``), like regenerating the demo corpus.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from fintts.tts.corpus import read_table
from fintts.tts.demo import make_corpus
from fintts.tts.eval import nearest_reference
from fintts.tts.voice import load_voice

#: Sentences in neither the demo's training nor its held-out clips (checked at run time).
SENTENCES = [
    "Isoäiti leipoo pullaa joka lauantai.",
    "Kissa nukkuu ikkunalaudalla auringossa.",
    "Junan ovet sulkeutuvat pian.",
    "Järven jää on vielä liian ohutta.",
    "Kirjasto avataan kello kymmenen.",
    "Poika heitti pallon aidan yli.",
    "Syksyllä lehdet putoavat puista.",
    "Kahvi on liian kuumaa juotavaksi.",
    "Naapurin lapset rakensivat lumiukon.",
    "Sieniä kasvaa paljon kuusimetsässä.",
    "Huomenna sataa lunta koko päivän.",
    "Vanha silta korjataan ensi kesänä.",
    "Mummo neuloo villasukkia lapsille.",
    "Torilla myydään tuoreita mansikoita.",
    "Lentokone laskeutui myöhässä.",
    "Hän unohti sateenvarjonsa bussiin.",
    "Pakkasta oli aamulla kaksikymmentä astetta.",
    "Koira haukkuu postinkantajalle.",
    "Tämä tie vie suoraan kaupunkiin.",
    "Pöydällä on kolme omenaa.",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", type=Path, help="an exported voice folder, e.g. runs/demo/model")
    parser.add_argument("--speaker", default="espeak_m3", help="a demo speaker (its espeak-ng settings are the reference)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the result here")
    args = parser.parse_args()

    trained = {item.text for table in make_corpus.DEFAULT_OUT.rglob("*.csv") for item in read_table(table, table.parent.name)[0]}
    overlap = [s for s in SENTENCES if s in trained]
    if overlap:
        raise SystemExit(f"these sentences are in the demo corpus, so they do not test generalisation: {overlap}")
    speaker = next((s for s in make_corpus.DEMO_SPEAKERS if s.name == args.speaker), None)
    if speaker is None:
        raise SystemExit(f"--speaker: {args.speaker} is not a demo speaker ({', '.join(s.name for s in make_corpus.DEMO_SPEAKERS)})")

    voice = load_voice(args.model, backend="torch", seed=args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        references = [
            make_corpus.trim_silence(make_corpus.resample(*make_corpus.synthesize(text, speaker, Path(tmp))), voice.sample_rate)
            for text in SENTENCES
        ]
    rows = []
    for k, text in enumerate(SENTENCES):
        said, _ = voice.synthesize(text, speaker=args.speaker if voice.config.num_speakers > 1 else None, warn=None)
        nearest, scores = nearest_reference(said, references, voice.sample_rate)
        rows.append({"text": text, "identified": nearest == k, "nearest": SENTENCES[nearest], "mcd_db": scores[k]})
        heard = "" if nearest == k else f"  (heard as: {SENTENCES[nearest]})"
        print(f"{'ok  ' if nearest == k else 'MISS'} {scores[k]:5.2f} dB  {text}" + heard)
    identified = sum(r["identified"] for r in rows)
    result = {
        "model": str(args.model), "speaker": args.speaker, "sentences": len(rows), "identified": identified,
        "chance": 1.0, "mean_mcd_db": statistics.fmean(r["mcd_db"] for r in rows), "rows": rows,
    }
    print(f"identified {identified} of {len(rows)} sentences (chance: 1); mean MCD {result['mean_mcd_db']:.2f} dB")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
