"""Trainable parameters and adapter size of a LoRA voice, for the demo and the MMS architecture.

    python benchmarks/lora_size.py                # r 8 (the README's figures), default targets
    python benchmarks/lora_size.py --r 4 16 --json out.json

The demo architecture is ``configs/demo.yaml``'s ``model:`` (4 speakers, as the demo corpus);
MMS is ``VitsConfig()`` — transformers' defaults are the MMS-TTS architecture — with
random weights (the sizes do not depend on the weights). The adapter's size is what
``save_pretrained`` writes (``adapter_model.safetensors``), beside the size of the whole
generator saved in float32.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import torch
import yaml
from transformers import VitsConfig, VitsModel

from fintts.tts.vits.init import DEFAULT_SPEAKER_EMBEDDING_SIZE
from fintts.tts.vits.lora import adapter_files, adapter_size, add_adapter
from fintts.tts.vits.settings import VitsLora

DEMO_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "demo.yaml"


def architectures() -> dict[str, VitsModel]:
    demo = yaml.safe_load(DEMO_CONFIG.read_text(encoding="utf-8"))["model"]
    demo = VitsConfig(**demo, num_speakers=4, speaker_embedding_size=DEFAULT_SPEAKER_EMBEDDING_SIZE)
    return {"demo (4 speakers)": VitsModel(demo), "MMS (VitsConfig defaults)": VitsModel(VitsConfig())}


def measure(name: str, vits: VitsModel, r: int) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        vits.save_pretrained(folder)
        full_mb = (Path(folder) / "model.safetensors").stat().st_size / 1e6
    adapter = add_adapter(vits, VitsLora(r=r), "voice")
    facts = adapter_size(adapter, "voice")
    file_mb = len(adapter_files(adapter, "voice")["voice/adapter_model.safetensors"]) / 1e6
    return {"architecture": name, "r": r, **facts, "adapter_file_mb": round(file_mb, 3), "generator_file_mb": round(full_mb, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--r", type=int, nargs="+", default=[8])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    for r in args.r:
        for name, vits in architectures().items():
            torch.manual_seed(0)
            rows.append(measure(name, vits, r))
            row = rows[-1]
            print(f"{name:28s} r={r:<3d} trainable {row['trainable_parameters']:>10,} of {row['generator_parameters']:>11,} "
                  f"({100 * row['trainable_parameters'] / row['generator_parameters']:.2f}%)  adapter {row['adapter_file_mb']:.2f} MB "
                  f"vs generator {row['generator_file_mb']:.1f} MB")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
