"""The Chatterbox voice on a laptop's CPU: T3 per speech token, S3Gen per second of audio, load time, peak memory (issue 57).

    python benchmarks/chatterbox_rtf.py --python VENV/bin/python --work /tmp/cbx-rtf --rounds 2

``VENV`` has the ``chatterbox`` package (chatterbox-light 1.0.2) beside this interpreter's torch: the recipe of
tests/tts/chatterbox/test_chatterbox_light.py (``python -m venv --system-site-packages VENV``, then ``pip install
--no-deps chatterbox-light==1.0.2 einops==0.8.1 diffusers==0.42.1 s3tokenizer==0.3.0 torchaudio==2.11.0`` and
``rm VENV/lib/python*/site-packages/torchaudio/lib/*.so``: the registry's torchaudio is a CUDA build that a CPU
torch cannot load). Every part runs in a process of its own (its peak RSS is its own), with ``--threads`` torch
threads (2: the laptop's cores this is about). Weights are random at the release's sizes: time depends on the sizes
and the token counts, not on what is said.

* ``folder`` (once per ``--work``): the folder ``fintts export`` writes, from upstream's S3Gen and voice encoder
  (random weights saved as ``s3gen.pt``, ``ve.pt``), fintts's ``ReleasedParts`` on a 10-s reference clip (the
  built-in voice's longest) and a real-size random T3 (536.0M).
* ``say``: what ``fintts say`` runs for such a voice, part by part: ``load_chatterbox_voice`` (upstream's
  ``from_local``: the load time), then per round upstream's ``T3.inference`` as ``generate`` calls it (the sentence's
  text ids, classifier-free guidance: a batch of 2, sampling, the KV cache) for ``--seconds`` × 25 speech tokens (random
  weights never say stop, so the count is set), and ``S3Gen.inference`` on that many speech tokens with the built-in
  voice's reference (10 flow steps with guidance, HiFT). RTF = (T3 + S3Gen) / seconds of audio.
* ``t3``: fintts's own ``T3.generate`` (greedy, batch 1, the KV cache; the validation's samples) for the same count.
* ``onnx``: where the time goes (T3's Llama, 503.4M of its 536.0M parameters, read once per token) exported to ONNX as
  the community runtimes' ``language_model`` graph is (inputs_embeds and the past keys/values in, logits and the
  presents out), ``--slice-layers`` of its 30 layers at the release's width, one step with a cache of
  ``--cache-positions``, timed in torch (fp32, and int8 dynamic quantisation of its Linears) and in onnxruntime (fp32,
  int8 dynamic MatMul, 4-bit MatMulNBits as the community's q4 graphs), batch 2 (guidance) and 1; scaled to 30 layers.

Each figure is the best of ``--rounds`` (the first round pays the kernels' warm-up; the machine may be shared); every
round's figure is printed too, one JSON line per part (``--json FILE`` keeps them), with the load average before and
after.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: ~5 s of read Finnish (84 characters at ~15 a second)
SENTENCE = "Huomenna aamulla sataa vettä, mutta iltapäivällä aurinko paistaa taas koko Suomessa."
TOKENS_PER_SECOND = 25
REFERENCE_SECONDS = 10
LAYERS = 30


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def build_folder(work: Path) -> dict:
    import numpy as np
    import torch
    from chatterbox.models.s3gen import S3Gen
    from chatterbox.models.voice_encoder import VoiceEncoder

    from fintts.tts.audio import load_audio
    from fintts.tts.chatterbox.cache import ClipTokens
    from fintts.tts.chatterbox.export import write_voice
    from fintts.tts.chatterbox.frozen import ReleasedParts
    from fintts.tts.chatterbox.t3 import T3, T3Settings
    from fintts.tts.chatterbox.text import ChatterboxText
    from fintts.tts.wav import save_wav

    voice = work / "voice"
    if (voice / "chatterbox.json").is_file():
        return {"part": "folder", "folder": str(voice), "made": False}
    torch.manual_seed(0)
    release = work / "release"
    release.mkdir(parents=True, exist_ok=True)
    torch.save(S3Gen().state_dict(), release / "s3gen.pt")
    torch.save(VoiceEncoder().state_dict(), release / "ve.pt")
    t = torch.arange(REFERENCE_SECONDS * 24_000) / 24_000
    wav = 0.3 * torch.sin(2 * np.pi * 220 * t) * (1 + 0.5 * torch.sin(2 * np.pi * 3 * t)) + 0.01 * torch.randn(len(t))
    save_wav(work / "reference.wav", wav.numpy(), 24_000)
    parts = ReleasedParts(release, torch.device("cpu"))
    clip16 = load_audio(work / "reference.wav", 16_000)
    speech, speaker = parts.speech_tokens(clip16), parts.speaker_embedding(clip16)
    gen = parts.decoder_conditioning(load_audio(work / "reference.wav", 24_000))
    del parts
    settings = T3Settings()
    text = ChatterboxText.builtin(settings.text_vocab_size)
    clip = ClipTokens(text_ids=torch.tensor(text.encode("hei")), speech_tokens=speech, speaker=speaker)
    write_voice(voice, weights=T3(settings).state_dict(), settings=settings, text=text, weights_from=str(release),
                release=release,
                t3_file="t3_mtl23ls_v2.safetensors", reference_id="bench/reference", clip=clip, emotion=0.5, gen=gen,
                card="benchmark")
    return {"part": "folder", "folder": str(voice), "made": True, "reference_tokens": int(speech.numel())}


def measure_say(work: Path, rounds: int, seconds: float) -> dict:
    """``fintts say``'s path, timed by its parts: upstream's ``generate`` is T3.inference, then S3Gen.inference."""
    import torch
    import torch.nn.functional as F

    from fintts.tts.chatterbox.speak import load_chatterbox_voice
    from fintts.tts.chatterbox.text import finnish_normaliser

    start = time.perf_counter()
    voice = load_chatterbox_voice(work / "voice")
    load_s = time.perf_counter() - start
    rss_loaded = peak_rss_mib()
    tts = voice.tts
    from chatterbox.mtl_tts import punc_norm

    text = punc_norm(finnish_normaliser().normalize(SENTENCE))
    ids = tts.tokenizer.text_to_tokens(text, language_id="fi")
    ids = torch.cat([ids, ids], dim=0)  # generate's batch of two: guidance's unconditioned copy
    ids = F.pad(F.pad(ids, (1, 0), value=tts.t3.hp.start_text_token), (0, 1), value=tts.t3.hp.stop_text_token)
    tokens = round(seconds * TOKENS_PER_SECOND)
    t3_s, s3gen_s, samples = [], [], 0  # T3's seconds per token, S3Gen's seconds per sentence, by round
    for n in range(rounds):
        torch.manual_seed(n)
        with torch.inference_mode():
            start = time.perf_counter()
            speech = tts.t3.inference(t3_cond=tts.conds.t3, text_tokens=ids, max_new_tokens=tokens, temperature=0.8,
                                      cfg_weight=0.5, repetition_penalty=1.2, min_p=0.05, top_p=1.0)
            t3_s.append((time.perf_counter() - start) / speech.shape[-1])  # random weights: a drawn stop ends it early
            valid = torch.randint(0, 6561, (tokens,))  # the ids S3Gen reads (generate drops the rest)
            start = time.perf_counter()
            wav, _ = tts.s3gen.inference(speech_tokens=valid, ref_dict=tts.conds.gen)
            s3gen_s.append(time.perf_counter() - start)
            samples = wav.shape[-1]
    audio_s = samples / tts.sr
    per_token, s3gen = min(t3_s), min(s3gen_s)
    return {"part": "say", "load_s": round(load_s, 2), "rss_after_load_mib": round(rss_loaded), "text_ids": ids.shape[1],
            "speech_tokens": tokens, "audio_s": round(audio_s, 3), "t3_s_per_token": [round(x, 4) for x in t3_s],
            "s3gen_s": [round(x, 2) for x in s3gen_s], "t3_rtf": round(per_token * TOKENS_PER_SECOND, 2),
            "s3gen_rtf": round(s3gen / audio_s, 2), "rtf": round((per_token * tokens + s3gen) / audio_s, 2),
            "peak_rss_mib": round(peak_rss_mib())}


def measure_t3(rounds: int, seconds: float) -> dict:
    """fintts's greedy ``T3.generate`` (batch 1, no guidance) at the release's sizes."""
    import torch

    from fintts.tts.chatterbox.t3 import T3, T3Settings
    from fintts.tts.chatterbox.text import ChatterboxText

    torch.manual_seed(0)
    start = time.perf_counter()
    t3 = T3(T3Settings()).eval()
    build_s = time.perf_counter() - start
    settings = t3.settings
    text = torch.tensor([settings.start_text_token, *ChatterboxText.builtin(settings.text_vocab_size).encode(SENTENCE),
                         settings.stop_text_token])
    with torch.no_grad():
        cond = t3.conditioning(torch.randn(1, 256), torch.randint(0, 6561, (1, settings.speech_cond_prompt_len)), None,
                               torch.tensor([0.5]))
    tokens = round(seconds * TOKENS_PER_SECOND)
    per_token = []
    for _ in range(rounds):
        start = time.perf_counter()
        made = t3.generate(cond, text, max_tokens=tokens)
        per_token.append((time.perf_counter() - start) / max(1, len(made)))
    return {"part": "t3", "build_s": round(build_s, 2), "text_ids": len(text), "speech_tokens": len(made),
            "s_per_token": [round(x, 4) for x in per_token], "rtf_t3": round(min(per_token) * TOKENS_PER_SECOND, 2),
            "peak_rss_mib": round(peak_rss_mib())}


def measure_onnx(work: Path, rounds: int, layers: int, cache: int, decoder_frames: int) -> dict:
    """One decoding step of a slice of T3's Llama (and its speech head) in torch and onnxruntime, scaled to 30 layers."""
    import numpy as np
    import onnx
    import onnxruntime as ort
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    from transformers import DynamicCache

    from fintts.tts.chatterbox.t3 import T3Settings

    logging.getLogger("onnxruntime").setLevel(logging.WARNING)  # the 4-bit quantiser logs every node at INFO
    settings = T3Settings(num_hidden_layers=layers)
    torch.manual_seed(0)

    class Step(torch.nn.Module):
        """``language_model``'s contract: the new rows' embeddings and the past keys/values in; logits, presents out."""

        def __init__(self):
            super().__init__()
            from transformers import LlamaModel

            self.tfmr = LlamaModel(settings.llama_config())
            self.speech_head = torch.nn.Linear(settings.hidden_size, settings.speech_vocab_size, bias=False)

        def forward(self, embeds, *past):
            kv = DynamicCache()
            for layer in range(layers):
                kv.update(past[2 * layer], past[2 * layer + 1], layer)
            hidden = self.tfmr(inputs_embeds=embeds, past_key_values=kv, use_cache=True).last_hidden_state
            presents = [t for layer in kv.layers for t in (layer.keys, layer.values)]
            return (self.speech_head(hidden), *presents)

    step = Step().eval()
    onnx_dir = work / "onnx"
    onnx_dir.mkdir(parents=True, exist_ok=True)
    heads, head_dim = settings.num_attention_heads, settings.head_dim
    figures: dict = {"part": "onnx", "slice_layers": layers, "cache_positions": cache}
    for batch in (2, 1):
        rng = np.random.default_rng(0)
        feeds = {"inputs_embeds": rng.standard_normal((batch, 1, settings.hidden_size), dtype=np.float32)}
        for layer in range(layers):
            for kind in ("key", "value"):
                feeds[f"past_key_values.{layer}.{kind}"] = rng.standard_normal((batch, heads, cache, head_dim), dtype=np.float32)
        names = list(feeds)
        args = tuple(torch.from_numpy(feeds[name]) for name in names)
        fp32 = onnx_dir / f"language_model_b{batch}.onnx"
        with torch.no_grad():
            expected = step(*args)[0].numpy()
            if not fp32.is_file():
                torch.onnx.export(step, args, str(fp32), input_names=names, output_names=["logits"] + [
                    f"present.{layer}.{kind}" for layer in range(layers) for kind in ("key", "value")],
                    opset_version=17, dynamo=False)
        int8, q4 = fp32.with_suffix(".int8.onnx"), fp32.with_suffix(".q4.onnx")
        if not int8.is_file():
            quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul"])
        if not q4.is_file():
            quantizer = MatMulNBitsQuantizer(onnx.load(str(fp32)), block_size=32, is_symmetric=True)
            quantizer.process()
            quantizer.model.save_model_to_file(str(q4), use_external_data_format=False)
        options = ort.SessionOptions()
        options.intra_op_num_threads = torch.get_num_threads()
        contenders = {}
        for label, graph in (("onnx fp32", fp32), ("onnx int8", int8), ("onnx q4", q4)):
            session = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
            got = session.run(["logits"], feeds)[0]
            contenders[label] = (lambda s=session: s.run(None, feeds), float(np.abs(got - expected).max()))
        quantized = torch.ao.quantization.quantize_dynamic(step, {torch.nn.Linear}, dtype=torch.qint8)

        def in_torch(model):
            def call():
                with torch.inference_mode():
                    model(*args)
            return call

        with torch.no_grad():
            contenders["torch int8"] = (in_torch(quantized), float((quantized(*args)[0].numpy() - expected).__abs__().max()))
        contenders = {"torch fp32": (in_torch(step), 0.0), **contenders}
        times: dict[str, list[float]] = {label: [] for label in contenders}
        for call, _ in contenders.values():
            call()  # warm
        for _ in range(rounds):
            for label, (call, _) in contenders.items():  # interleaved: a busy moment hits every contender
                start = time.perf_counter()
                for _ in range(5):
                    call()
                times[label].append((time.perf_counter() - start) / 5)
        figures[f"batch{batch}"] = {
            label: {"s_per_step": round(min(times[label]), 4),
                    "s_per_token_30_layers": round(min(times[label]) * LAYERS / layers, 3),
                    "max_abs_logit_error": round(err, 4)} for label, (_, err) in contenders.items()}
    figures["decoder"] = measure_decoder(onnx_dir, rounds, decoder_frames)
    figures["graph_bytes"] = {path.name: path.stat().st_size + sum(p.stat().st_size for p in onnx_dir.glob(path.name + ".data"))
                              for path in sorted(onnx_dir.glob("*.onnx"))}
    figures["peak_rss_mib"] = round(peak_rss_mib())
    return figures


def measure_decoder(onnx_dir: Path, rounds: int, frames: int) -> dict:
    """S3Gen's flow estimator (``flow.decoder.estimator``: called 10 times per sentence, a batch of 2 for guidance) at
    ``frames`` mel frames (the reference's and the sentence's), in torch and in onnxruntime (fp32, int8 dynamic MatMul)."""
    import numpy as np
    import onnxruntime as ort
    import torch
    from chatterbox.models.s3gen import S3Gen
    from onnxruntime.quantization import QuantType, quantize_dynamic

    torch.manual_seed(0)
    estimator = S3Gen().flow.decoder.estimator.eval()
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((2, 80, frames), dtype=np.float32), "mask": np.ones((2, 1, frames), np.float32),
             "mu": rng.standard_normal((2, 80, frames), dtype=np.float32), "t": np.full(2, 0.3, np.float32),
             "spks": rng.standard_normal((2, 80), dtype=np.float32), "cond": rng.standard_normal((2, 80, frames), dtype=np.float32)}
    args = tuple(torch.from_numpy(value) for value in feeds.values())
    graph = onnx_dir / f"estimator_{frames}.onnx"
    with torch.no_grad():
        expected = estimator(*args).numpy()
        if not graph.is_file():
            torch.onnx.export(estimator, args, str(graph), input_names=list(feeds), output_names=["dxdt"], opset_version=17,
                              dynamo=False)
    int8 = graph.with_suffix(".int8.onnx")
    if not int8.is_file():
        quantize_dynamic(str(graph), str(int8), weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul"])
    options = ort.SessionOptions()
    options.intra_op_num_threads = torch.get_num_threads()
    sessions = {label: ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
                for label, path in (("onnx fp32", graph), ("onnx int8", int8))}
    errors = {label: float(np.abs(session.run(None, feeds)[0] - expected).max()) for label, session in sessions.items()}

    def in_torch():
        with torch.inference_mode():
            estimator(*args)

    contenders = {"torch fp32": in_torch, **{label: (lambda s=session: s.run(None, feeds)) for label, session in sessions.items()}}
    times: dict[str, list[float]] = {label: [] for label in contenders}
    for call in contenders.values():
        call()  # warm: oneDNN's and onnxruntime's first call prepares their kernels
    for _ in range(rounds):
        for label, call in contenders.items():
            start = time.perf_counter()
            call()
            times[label].append(time.perf_counter() - start)
    return {"frames": frames, "max_abs_error": {label: round(error, 5) for label, error in errors.items()},
            **{label: {"s_per_call": [round(x, 3) for x in times[label]], "s_per_sentence_10_steps": round(
                10 * min(times[label]), 2)} for label in contenders}}


def child(args) -> dict:
    import torch

    torch.set_num_threads(args.threads)
    if args.child == "folder":
        return build_folder(args.work)
    if args.child == "say":
        return measure_say(args.work, args.rounds, args.seconds)
    if args.child == "t3":
        return measure_t3(args.rounds, args.seconds)
    return measure_onnx(args.work, args.rounds, args.slice_layers, args.cache_positions, args.decoder_frames)


def load() -> str:
    return Path("/proc/loadavg").read_text().split(" ")[:3].__str__()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", default=sys.executable,
                        help="an interpreter with the chatterbox package and onnx_ir (onnxruntime's 4-bit quantiser needs it)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/chatterbox-rtf"))
    parser.add_argument("--parts", default="say,t3,onnx")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds of speech (× 25 speech tokens)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--slice-layers", type=int, default=2)
    parser.add_argument("--cache-positions", type=int, default=230,
                        help="the KV cache at a step: 34 conditioning rows + ~86 text ids + half of 5 s of speech tokens ~ 230")
    parser.add_argument("--decoder-frames", type=int, default=750,
                        help="S3Gen's mel frames: 2 a speech token, the 10-s reference's 250 tokens and 5 s of speech")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", choices=["folder", "say", "t3", "onnx"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args)), flush=True)
        return 0
    args.work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ) | {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
                              "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": str(args.threads)}
    results = [{"load_before": load()}]
    parts = args.parts.split(",")
    for part in (["folder"] if "say" in parts else []) + parts:
        command = [args.python, __file__, "--child", part, "--work", str(args.work), "--rounds", str(args.rounds),
                   "--seconds", str(args.seconds), "--threads", str(args.threads), "--slice-layers", str(args.slice_layers),
                   "--cache-positions", str(args.cache_positions), "--decoder-frames", str(args.decoder_frames)]
        start = time.perf_counter()
        run = subprocess.run(command, capture_output=True, text=True, env=env)
        if run.returncode != 0:
            print(run.stderr[-3000:], file=sys.stderr)
            return run.returncode
        result = json.loads(run.stdout.strip().splitlines()[-1]) | {"wall_s": round(time.perf_counter() - start, 1)}
        print(json.dumps(result), flush=True)
        results.append(result)
    results.append({"load_after": load()})
    print(json.dumps(results[-1]))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
