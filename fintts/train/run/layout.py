"""The run folder's names, each written once: every module that makes a path in a run imports it from here.

A run is a store's local ``root`` (the same tree on the Hub, less what is local only)::

    latest  checkpoints/step-NNNNNNNN/   the checkpoint to resume from, and every kept one (their files: run/checkpoint.py)
    status.json                          running|paused|finished|failed and a summary (report/status.py)
    README.md  loss.png                  the run's page (the Hub's repo card) and the newest checkpoint's loss plot
    model/                               the best model so far, the task's export (a voice: the laptop's VOICE_DIR)
    samples/  tb/                        a validation's files as the task names them (in each checkpoint), TensorBoard's
    cache/                               the task's caches worth keeping between sessions (features, downloads)
    cache/carried/                       those worth carrying to a fresh disk: the Hub store pushes and fetches them
    pushes.json  lease.json              the Hub store's ledger of pushes, and the lease on the Hub (who trains)
    .hub/                                the Hub store's own files (repo.json: the repo this folder mirrors)
    logs/  writer.lock  bench.json       local only: the launched processes' output, the local store's lock, fintts bench's

Names only, importing nothing: the laptop-side commands, the stores and the Kaggle commands read them without torch.
"""

LATEST = "latest"
CHECKPOINTS = "checkpoints"
STATUS = "status.json"
#: a Hub repo's card: the run's page, and the card of the voice in ``model/`` or of a published voice
CARD = "README.md"
#: the newest checkpoint's loss plot (each pushed or final checkpoint holds its own), copied beside the card for the page
LOSS_PLOT = "loss.png"
MODEL_DIR = "model"
SAMPLES_DIR = "samples"
TENSORBOARD_DIR = "tb"
CACHE_DIR = "cache"
#: in ``cache/``: what a task makes once for the whole run (its files named by their content, never rewritten), which
#: the Hub store carries to a fresh disk: pushed with each checkpoint (the files the Hub lacks), fetched at resume
CARRIED_DIR = "carried"
#: the same, from the run's root
CARRIED_CACHE = f"{CACHE_DIR}/{CARRIED_DIR}"
PUSHES = "pushes.json"
LEASE = "lease.json"
#: the Hub store's own folder in its local mirror (snapshots waiting for upload, downloads in progress, the repo it
#: mirrors); nothing in it is pushed
HUB_DIR = ".hub"
#: in ``.hub/``: the Hub repo this folder mirrors
HUB_BINDING = "repo.json"
LOGS_DIR = "logs"
WRITER_LOCK = "writer.lock"
BENCH_FILE = "bench.json"
