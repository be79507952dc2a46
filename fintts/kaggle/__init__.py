"""fintts on Kaggle: the wheels dataset, the pushed notebook, and the laptop's side of a run of sessions.

- :mod:`.client` — the one place the ``kaggle`` client is created (it authenticates at import time, and again on a 401);
- :mod:`.wheels` — ``fintts kaggle wheels``: the read-only dataset a session installs fintts from;
- :mod:`.corpus` — ``fintts kaggle corpus``: what the check of a corpus used, uploaded with its folders, the rest named;
- :mod:`.kernel` — ``fintts kaggle push``: ``kernel-metadata.json`` from the root template, the staged folder;
- :mod:`.parameters` — the notebook's ``parameters`` cell, read and written;
- :mod:`.sessions` — ``fintts kaggle run`` (sessions chained until the run is finished) and ``status``;
- :mod:`.hub_run` — the run as the chain reads it on the Hub after each session;
- :mod:`.output` — a version's output on Kaggle: the newest checkpoint a final push left behind, pushed from it;
- :mod:`.clock` — the chain's time and waits, passed in (tests play Kaggle's hours in seconds);
- :mod:`.kernels` — what Kaggle says of a kernel (exists? its version's state, its log) and of a push's datasets;
- :mod:`.quota` — the weekly GPU quota, and the budget it leaves the next session;
- :mod:`.secret` — the Hugging Face token of a session: the ``HF_TOKEN`` secret or the private dataset
  ``<you>/fintts-token`` (``fintts kaggle token``), and what the laptop says when a session had none;
- :mod:`.hub_token` — which Hugging Face token ``fintts kaggle token`` stores and what it may write, as the Hub says;
- :mod:`.visibility` — whether a dataset of yours may take an upload: absent, or private (a public one is refused);
- :mod:`.inputs` — where a session finds an attached dataset, under either of Kaggle's mount layouts;
- :mod:`.notebook` — the training notebook's corpus check, the token handed to the training alone, and its last
  cell: the session, its samples, what next.
- :mod:`.cli` — the ``fintts kaggle`` commands of the command line, over the modules above.
"""
