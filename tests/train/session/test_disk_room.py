"""Room on the disk before a save (fintts/train/session/disk_room.py): what keep_last would delete goes first, else the
save is skipped with one line and the session trains on. The store's disk is a small one: a store whose free space is
a capacity less what its folder holds (the free-space reading is the one thing it changes; the checkpoints are written
as always)."""

from __future__ import annotations

import pytest

from fintts.train import Trainer
from fintts.train.config import load_config
from fintts.train.run import checkpoint
from fintts.train.run.checkpoint import regular_files
from fintts.train.stores.local import LocalStore
from trainer_helpers import QUIET, write_config


class SmallDisk(LocalStore):
    """The run's folder on a disk of ``capacity`` bytes that holds nothing else."""

    def __init__(self, root, capacity: int):
        super().__init__(root)
        self.capacity = capacity

    def free_bytes(self) -> int:
        return max(0, self.capacity - sum(path.stat().st_size for path in regular_files(self.root)))


def first_session(tmp_path, keep_last: int, **settings):
    """Four steps on a roomy disk, checkpoints at 2 and 4; the config, the store, what it holds and one checkpoint's size."""
    settings = {"eval_every": 0, **settings}
    config = write_config(tmp_path, max_steps=4, checkpoint_every_steps=2, keep_last=keep_last, **settings)
    store = tmp_path / "run"
    Trainer(load_config(config, [f"store={store}"]), **QUIET).run()
    used = sum(path.stat().st_size for path in regular_files(store))
    return config, store, used, checkpoint.size_of(store, "step-00000004")


@pytest.mark.slow
def test_what_keep_last_deletes_after_a_save_goes_before_it_when_the_disk_has_no_room(tmp_path):
    config, store, used, size = first_session(tmp_path, keep_last=2)
    assert checkpoint.list_names(store) == ["step-00000002", "step-00000004"]
    said = []
    Trainer(load_config(config, [f"store={store}", "max_steps=8"]), store=SmallDisk(store, used + size // 2),
            progress=False, log=said.append).run()
    assert any(line.startswith("step 6: deleted step-00000002 before this save") for line in said), said
    assert not any("not saved" in line for line in said), said
    assert checkpoint.list_names(store) == ["step-00000006", "step-00000008"]  # keep_last: 2 after the final save
    checkpoint.verify(store / "checkpoints" / "step-00000006")


@pytest.mark.slow
def test_a_save_the_disk_has_no_room_for_is_skipped_with_one_line_and_the_session_trains_on(tmp_path):
    # the best is step 2's (no later validation beats it by min_delta), kept beside latest: a new best would free it
    config, store, used, size = first_session(tmp_path, keep_last=1, eval_every=2, min_delta=1e9, patience=0)
    assert checkpoint.list_names(store) == ["step-00000002", "step-00000004"]
    said = []  # half a checkpoint free: with the best's folder, once freed, the next one would fit
    summary = Trainer(load_config(config, [f"store={store}", "max_steps=8"]), store=SmallDisk(store, used + size // 2),
                      progress=False, log=said.append).run()
    skipped = [line for line in said if "not saved" in line]
    assert len(skipped) == 1 and skipped[0].startswith("step 6: the checkpoint was not saved: the disk has no room"), said
    assert summary.end_step == 8 and not any(line.startswith("stopping:") for line in said), said
    # the session's final save is never skipped (a full disk there is survived as before): it keeps the last step
    assert checkpoint.read_latest(store) == "step-00000008"
    assert "step-00000006" not in checkpoint.list_names(store)


@pytest.mark.slow
def test_where_nothing_kept_could_ever_make_room_the_save_goes_ahead_rather_than_training_on_unsaved(tmp_path):
    # latest alone on the disk: no later save could free anything, so skipping would only spend the session on steps
    # that no save keeps; the save is made (here the disk's reading is small but its writes succeed), and on a really
    # full disk it fails whole, ending the session at latest (tests/train/step/test_faults.py)
    config, store, used, _ = first_session(tmp_path, keep_last=1)
    assert checkpoint.list_names(store) == ["step-00000004"]
    said = []
    Trainer(load_config(config, [f"store={store}", "max_steps=8"]), store=SmallDisk(store, used),
            progress=False, log=said.append).run()
    assert not any("not saved" in line for line in said), said
    assert any(line.startswith("step 6: saving a checkpoint") for line in said), said
