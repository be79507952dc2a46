"""A tiny Finnish VITS run on the shipped demo corpus: seconds per step on a CPU."""

from __future__ import annotations

import yaml

TINY_MODEL = {
    "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "ffn_dim": 32, "flow_size": 8,
    "spectrogram_bins": 65, "upsample_initial_channel": 32, "upsample_rates": [4, 4, 4], "upsample_kernel_sizes": [8, 8, 8],
    "resblock_kernel_sizes": [3], "resblock_dilation_sizes": [[1, 3]], "prior_encoder_num_flows": 2,
    "prior_encoder_num_wavenet_layers": 1, "posterior_encoder_num_wavenet_layers": 2, "duration_predictor_num_flows": 2,
    "duration_predictor_filter_channels": 16, "depth_separable_num_layers": 2, "sampling_rate": 16000,
}
TINY_DISCRIMINATOR = {"periods": [2, 3], "scale_channels": [8, 16, 16], "scale_groups": [1, 2, 1], "period_channels": [8, 16]}
TINY = {
    "task": "vits", "data": "demo", "init": "scratch", "max_steps": 6, "batch_size": 4, "eval_every": 3,
    "num_workers": 0, "segment_frames": 16, "mcd_items": 2, "eval_speakers": 1, "eval_sentences": ["Kello on 7.30."],
    "speakers": ["espeak_f2", "espeak_m3"], "model": TINY_MODEL, "discriminator_config": TINY_DISCRIMINATOR,
    # the ONNX export stays on, as shipped: a test config may shrink the model, never switch off a part of the path
}


def tiny_config(folder, **settings):
    path = folder / "tiny.yaml"
    path.write_text(yaml.safe_dump({**TINY, **settings}, allow_unicode=True))
    return path
