"""Faults at the edges of a session, raised for real: NaN and overflow, loss spikes, out of memory,
another precision, a damaged or hand-edited ``latest``, a full disk, hostile names, two writers."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest
import torch

from fintts.train import train
from fintts.train.run import checkpoint
from fintts.train.run.checkpoint import CheckpointError
from trainer_helpers import FAULTY, QUIET, _env, final_weights, in_process, start_cli, stop, wait_for_step, write_config


def status_of(store) -> dict:
    return json.loads((store / "status.json").read_text())


def assert_finite(weights: dict[str, torch.Tensor]) -> None:
    assert all(torch.isfinite(w).all() for w in weights.values()), "a NaN or inf reached the saved weights"


# ---------------------------------------------------------------- numbers going bad


@pytest.mark.slow
def test_fp16_overflow_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path):
    config = write_config(
        tmp_path, task=FAULTY, precision="fp16", adversarial=False, max_steps=300, checkpoint_every_steps=4, eval_every=0,
        fault="nan", fault_at=10, fault_steps=0,
    )
    store = tmp_path / "store"
    summary = train(config, store=store, **QUIET)
    assert summary.state == "failed" and summary.reason == "diverged"
    assert summary.end_step < 40  # stopped when the loss scale hit its floor, not after 300 steps
    assert "loss scale fell to" in summary.format() and "step-00000008 is kept as latest" in summary.format()
    assert checkpoint.read_latest(store) == "step-00000008"  # nothing saved once the steps went bad
    assert_finite(final_weights(store))
    assert status_of(store)["state"] == "failed"


@pytest.mark.slow
def test_nan_gradients_behind_a_finite_loss_never_reach_the_weights(tmp_path):
    config = write_config(
        tmp_path, task=FAULTY, adversarial=False, max_steps=60, checkpoint_every_steps=4, eval_every=0,
        fault="nan-grad", fault_at=12, fault_steps=0,  # from a step that saves a checkpoint
    )
    store = tmp_path / "store"
    summary = train(config, store=store, **QUIET)
    assert summary.state == "failed" and summary.end_step == 36  # steps 12..36 skipped (max_skipped_steps=25), then the stop
    assert "25 steps in a row were skipped (non-finite gradients)" in summary.format()
    assert checkpoint.read_latest(store) == "step-00000008"
    assert_finite(final_weights(store))


@pytest.mark.slow
def test_a_loss_spike_is_skipped_and_training_goes_on(tmp_path):
    config = write_config(tmp_path, task=FAULTY, max_steps=30, eval_every=0, fault="spike", fault_at=20)
    messages: list[str] = []
    summary = train(config, store=tmp_path / "store", progress=False, log=messages.append)
    assert summary.state == "finished" and summary.end_step == 30
    assert any(m.startswith("step 20 skipped: loss spike") for m in messages), messages
    assert "1 step(s) were skipped in this session, the last for: loss spike" in summary.format()
    assert_finite(final_weights(tmp_path / "store"))


@pytest.mark.slow
def test_out_of_memory_saves_the_step_and_says_how_to_fit(tmp_path):
    config = write_config(
        tmp_path, task=FAULTY, adversarial=False, max_steps=20, checkpoint_every_steps=0, eval_every=0, fault="oom", fault_at=7,
    )
    store = tmp_path / "store"
    result = in_process("train", str(config), "--store", str(store), "--no-progress", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert "out of memory at step 7" in result.stdout and "micro_batch_size=8" in result.stdout
    assert checkpoint.read_latest(store) == "step-00000006"
    checkpoint.verify(store / "checkpoints" / "step-00000006")
    assert status_of(store)["state"] == "failed"
    messages: list[str] = []
    summary = train(config, store=store, micro_batch_size=8, fault="", progress=False, log=messages.append)
    assert summary.state == "finished" and summary.start_step == 6
    assert any("accumulation is now 2" in m for m in messages)


# ---------------------------------------------------------------- other hardware


@pytest.mark.slow
def test_a_run_moves_between_precisions_with_its_loss_scale_converted(tmp_path):
    config = write_config(tmp_path, adversarial=False, max_steps=4, eval_every=0)
    store = tmp_path / "store"
    train(config, store=store, precision="fp32", **QUIET)  # a CPU session...
    messages: list[str] = []
    summary = train(config, store=store, precision="fp16", max_steps=8, allow_config_change=True, progress=False, log=messages.append)
    assert summary.end_step == 8  # ...then a T4 session
    assert any("was trained in fp32; fp16 loss scaling starts fresh" in m for m in messages), messages
    state = json.loads((store / "checkpoints" / "step-00000008" / "state.json").read_text())
    assert state["precision"] == "fp16" and state["versions"]["torch"] == torch.__version__
    messages.clear()
    summary = train(config, store=store, precision="bf16", max_steps=10, allow_config_change=True, progress=False, log=messages.append)
    assert summary.end_step == 10  # ...then an Ampere session
    assert any("was trained in fp16; its loss scale" in m and "is dropped" in m for m in messages), messages
    assert json.loads((store / "checkpoints" / "step-00000010" / "state.json").read_text())["precision"] == "bf16"
    assert any("is dropped" in w for w in summary.warnings)


# ---------------------------------------------------------------- latest


@pytest.mark.slow
def test_the_end_of_a_session_saves_again_when_latest_was_damaged_or_edited(tmp_path):
    config = write_config(tmp_path, max_steps=8, eval_every=0, checkpoint_every_steps=5)
    store = tmp_path / "store"
    train(config, store=store, **QUIET)  # checkpoints 5 and 8
    weights = store / "checkpoints" / "step-00000008" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])  # damaged after the session ended
    summary = train(config, store=store, **QUIET)  # resumes from 5, trains to 8 again
    assert summary.start_step == 5 and summary.end_step == 8
    checkpoint.verify(store / "checkpoints" / "step-00000008")  # rewritten, not republished as it was
    (store / "latest").write_text("my-favourite\n")  # edited by hand
    summary = train(config, store=store, max_steps=10, **QUIET)
    assert summary.state == "finished" and checkpoint.read_latest(store) == "step-00000010"
    checkpoint.verify(store / "checkpoints" / "step-00000010")


@pytest.mark.slow
def test_a_checkpoint_saved_before_the_best_holder_was_recorded_still_keeps_it(tmp_path):
    # The loss falls, and the monitor asks for the highest: the first validation (step 4) stays the best.
    config = write_config(tmp_path, max_steps=8, eval_every=4, checkpoint_every_steps=4, keep_last=1, monitor="max:val/loss")
    store = tmp_path / "store"
    train(config, store=store, **QUIET)
    folder = store / "checkpoints" / "step-00000008"
    state = json.loads((folder / "state.json").read_text())
    del state["best_checkpoint"]  # as fintts wrote it before it recorded the holder
    (folder / "state.json").write_text(json.dumps(state))
    checkpoint.write_manifest(folder)
    summary = train(config, store=store, max_steps=16, **QUIET)
    assert summary.best["checkpoint"] == "step-00000004" and "step-00000004" in checkpoint.list_names(store)


# ---------------------------------------------------------------- a full disk


def run_on_a_small_disk(tmp_path, script: str, size: str) -> subprocess.CompletedProcess:
    """Run bash ``script`` where ``$DISK`` is a tmpfs of ``size``: a real full disk (ENOSPC), in a private mount namespace."""
    disk = tmp_path / "disk"
    disk.mkdir()
    body = f'mount -t tmpfs -o size={size} fintts-test "$DISK" || exit 97\n{script}'
    namespace = ["unshare", "--mount"] if os.geteuid() == 0 else ["unshare", "--user", "--map-root-user", "--mount"]
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux) to mount a small disk")
    result = subprocess.run(
        [*namespace, "bash", "-c", body], env=_env() | {"DISK": str(disk), "OUT": str(tmp_path)}, cwd=tmp_path,
        capture_output=True, text=True, timeout=300,
    )
    if result.returncode == 97 or "unshare:" in result.stderr:
        pytest.skip(f"cannot mount a small disk here: {result.stderr.strip()[:200]}")
    return result


FILL_LEAVING = textwrap.dedent(
    """
    import errno, os, sys
    path, leave = sys.argv[1], int(sys.argv[2])
    with open(path, "wb") as handle:
        try:
            while True:
                handle.write(b"\\0" * 65536)
                handle.flush()
        except OSError as err:
            assert err.errno == errno.ENOSPC, err
    os.truncate(path, os.path.getsize(path) - leave)
    """
)


@pytest.mark.slow
def test_a_full_disk_stops_the_session_with_the_previous_checkpoint_intact(tmp_path):
    config = write_config(tmp_path, max_steps=12, checkpoint_every_steps=4, eval_every=4)
    (tmp_path / "fill.py").write_text(FILL_LEAVING)
    train_cmd = f'python -m fintts train {config} --store "$DISK/run" --no-progress'
    script = textwrap.dedent(
        f"""
        {train_cmd} --max-steps 4 > "$OUT/first.txt" 2>&1 || exit 98
        python "$OUT/fill.py" "$DISK/ballast" 24576
        {train_cmd} > "$OUT/second.txt" 2>&1; echo $? > "$OUT/second.rc"
        cp -a "$DISK/run" "$OUT/after-full"
        rm "$DISK/ballast"
        {train_cmd} > "$OUT/third.txt" 2>&1; echo $? > "$OUT/third.rc"
        cp -a "$DISK/run" "$OUT/final"
        """
    )
    result = run_on_a_small_disk(tmp_path, script, size="3m")
    assert result.returncode == 0, (result.stderr, (tmp_path / "first.txt").read_text())
    second = (tmp_path / "second.txt").read_text()
    assert (tmp_path / "second.rc").read_text().strip() == "1", second
    assert "is full" in second and "checkpoint step-00000008 was not written" in second, second
    after = tmp_path / "after-full"
    assert checkpoint.read_latest(after) == "step-00000004"
    checkpoint.verify(after / "checkpoints" / "step-00000004")
    assert not list((after / "checkpoints").glob(".partial-*"))  # the space was given back
    status = status_of(after)
    assert status["state"] == "failed" and status["reason"] == "disk_full"
    assert any("is full" in w for w in status["warnings"])
    shown = in_process("status", "--store", str(after), cwd=tmp_path)
    assert shown.returncode == 0 and "warning     the disk under" in shown.stdout, shown.stdout
    third = (tmp_path / "third.txt").read_text()
    assert (tmp_path / "third.rc").read_text().strip() == "0", third
    assert "from step-00000004" in third and status_of(tmp_path / "final")["state"] == "finished"


FULL_AT_LATEST = textwrap.dedent(
    """
    import errno, os, sys
    from pathlib import Path

    # The disk fills in the instant between the checkpoint folder's rename and `latest`: from the moment
    # step-00000008 exists, the OS refuses every new file beside `latest` (an audit hook is how Python
    # lets a process see its own opens; the refusal is the OSError a full disk raises).
    store = Path(sys.argv[1])
    def full_disk(event, args):
        latest = event == "open" and isinstance(args[0], str) and Path(args[0]).name.startswith(".latest.tmp-")
        if latest and (store / "checkpoints" / "step-00000008").is_dir():
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), args[0])
    sys.addaudithook(full_disk)
    from fintts.cli import main
    sys.exit(main(sys.argv[2:]))
    """
)


@pytest.mark.slow
def test_a_disk_that_fills_at_latest_keeps_the_whole_checkpoint_and_the_next_session_resumes_from_it(tmp_path):
    config = write_config(tmp_path, max_steps=12, checkpoint_every_steps=4, eval_every=4)
    store = tmp_path / "run"
    (tmp_path / "full_at_latest.py").write_text(FULL_AT_LATEST)
    full = subprocess.run([sys.executable, str(tmp_path / "full_at_latest.py"), str(store), "train", str(config), "--store", str(store),
                           "--no-progress"], cwd=tmp_path, capture_output=True, text=True, timeout=240, env=_env())
    out = full.stdout + full.stderr
    assert full.returncode == 1, out
    assert "checkpoint step-00000008 was written whole" in out and "was not written" not in out, out
    checkpoint.verify(store / "checkpoints" / "step-00000008")  # the folder is complete, and nothing says otherwise
    assert not (store / "latest").exists() and not list(store.glob(".latest.tmp-*"))
    status = status_of(store)
    assert status["state"] == "failed" and status["reason"] == "disk_full"
    assert status["latest_checkpoint"].endswith("step-00000008")
    resumed = in_process("train", str(config), "--store", str(store), "--no-progress", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "from step-00000008" in resumed.stdout + resumed.stderr  # not from step-00000004, which the old latest named
    assert checkpoint.read_latest(store) == "step-00000012" and status_of(store)["state"] == "finished"


FEATURES_ON_A_FULL_DISK = textwrap.dedent(
    """
    import sys, warnings
    from pathlib import Path
    import numpy as np, soundfile as sf, torch
    from fintts.tts.spectrogram import SpectrogramConfig
    from fintts.tts.features import FeatureCache

    clips = []
    for i in range(8):  # generated on the roomy disk; only the cache is on the full one
        path = Path(sys.argv[2]) / f"clip{i}.wav"
        sf.write(path, 0.1 * np.sin(np.arange(8000 + 800 * i) * (0.05 + 0.01 * i)), 16000)
        clips.append(path)
    cache = FeatureCache(Path(sys.argv[1]), SpectrogramConfig(16000, 1024, 256, 1024, 80))

    class Clips(torch.utils.data.Dataset):
        def __len__(self):
            return len(clips)

        def __getitem__(self, index):
            return cache.get(clips[index]).spec.shape[-1]

    loader = torch.utils.data.DataLoader(Clips(), batch_size=2, num_workers=2, persistent_workers=True)
    for epoch in range(2):
        frames = [int(f) for batch in loader for f in batch]
    print("frames", frames)
    """
)


@pytest.mark.slow
def test_a_feature_cache_on_a_full_disk_leaves_the_data_loader_running_with_one_warning(tmp_path):
    (tmp_path / "fill.py").write_text(FILL_LEAVING)
    (tmp_path / "features.py").write_text(FEATURES_ON_A_FULL_DISK)
    (tmp_path / "clips").mkdir()
    script = textwrap.dedent(
        """
        mkdir "$DISK/cache"
        python "$OUT/fill.py" "$DISK/ballast" 12288
        python "$OUT/features.py" "$DISK/cache" "$OUT/clips" > "$OUT/out.txt" 2> "$OUT/err.txt"; echo $? > "$OUT/rc"
        """
    )
    result = run_on_a_small_disk(tmp_path, script, size="1m")
    assert result.returncode == 0, result.stderr
    out, err = (tmp_path / "out.txt").read_text(), (tmp_path / "err.txt").read_text()
    assert (tmp_path / "rc").read_text().strip() == "0", err
    assert out.startswith("frames ") and len(out.split()[1:]) == 8, out  # every clip, computed in memory
    assert err.count("cannot be written") == 1, err  # one warning, for both workers and both epochs
    assert "No space left on device" in err


# ---------------------------------------------------------------- names from outside


@pytest.mark.slow
def test_a_task_file_name_reaching_outside_the_checkpoint_is_refused(tmp_path):
    config = write_config(tmp_path, task=FAULTY, max_steps=4, eval_every=2, fault="escape")
    store = tmp_path / "run" / "store"
    with pytest.raises(CheckpointError, match=r"escaped\.json.*not a relative path inside"):
        train(config, store=store, **QUIET)
    assert not list(tmp_path.rglob("escaped.json"))
    assert status_of(store)["state"] == "failed"


def test_verify_trusts_only_a_manifest_that_stays_inside_and_lists_every_file(tmp_path):
    secret = tmp_path / "token.txt"
    secret.write_text("hf_not_for_the_hub")
    root = tmp_path / "run"
    checkpoint.save(root, "step-00000001", lambda folder: (folder / "state.json").write_text("{}"))
    folder = root / "checkpoints" / "step-00000001"
    manifest_path = folder / "MANIFEST.json"
    manifest = json.loads(manifest_path.read_text())
    digest = hashlib.sha256(secret.read_bytes()).hexdigest()
    outside = dict(manifest, files={**manifest["files"], "../../../token.txt": {"sha256": digest, "size": secret.stat().st_size}})
    manifest_path.write_text(json.dumps(outside))
    with pytest.raises(CheckpointError, match="not a relative path"):
        checkpoint.verify(folder)
    manifest_path.write_text(json.dumps(dict(manifest, files={})))
    with pytest.raises(CheckpointError, match="lists no files"):
        checkpoint.verify(folder)
    manifest_path.write_text(json.dumps(manifest))
    (folder / "extra.bin").write_bytes(b"planted")
    with pytest.raises(CheckpointError, match="extra.bin is not in MANIFEST"):
        checkpoint.verify(folder)
    (folder / "extra.bin").unlink()
    checkpoint.verify(folder)

    def with_a_link(target):
        (target / "state.json").write_text("{}")
        (target / "token").symlink_to(secret)

    with pytest.raises(CheckpointError, match="symbolic link"):
        checkpoint.save(root, "step-00000002", with_a_link)
    assert not (root / "checkpoints" / ".partial-step-00000002").exists()
    assert checkpoint.read_latest(root) == "step-00000001"


# ---------------------------------------------------------------- two writers on one machine


@pytest.mark.process
def test_a_running_trainer_keeps_its_store_even_from_force(tmp_path):
    config = write_config(tmp_path, max_steps=100_000, step_delay=0.02, eval_every=0, checkpoint_every_steps=4)
    store = tmp_path / "store"
    first = start_cli("train", str(config), "--store", str(store), "--no-progress", cwd=tmp_path)
    try:
        wait_for_step(store, 4, first)
        forced = in_process("train", str(config), "--store", str(store), "--force", "--no-progress", cwd=tmp_path)
        assert forced.returncode == 4, forced.stdout
        assert f"being trained by process {first.pid}" in forced.stderr
    finally:
        out = stop(first, signal.SIGTERM)
    assert first.returncode == 0, out
    after = in_process("train", str(config), "--store", str(store), "--max-steps", "2", "--no-progress", cwd=tmp_path)
    assert after.returncode == 0, after.stderr  # the lock went with its process: no --force needed
