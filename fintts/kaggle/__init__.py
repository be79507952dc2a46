"""fintts on Kaggle: the notebook's install and last cell, and the laptop's side of a run of sessions.

- :mod:`.client` — the one place the ``kaggle`` client is created (it authenticates at import time);
- :mod:`.parameters` — the notebook's ``parameters`` cell, read and written;
- :mod:`.notebook` — the training notebook's last cell: the session, its samples, what next.
"""
