"""Only the process that pushes holds the Hugging Face token: what the launcher hands every other process it starts.

The token is a write credential to the person's account. Of a session's processes only the main one
talks to the Hub as the run's writer (the lease, the pushes, the status); the other training
processes and the collective check's processes never do, so they get an environment with no way
to the token. The ways huggingface_hub 2.4.0 finds one (``get_token`` in utils/_auth.py): an OIDC
exchange when ``HF_OIDC_RESOURCE`` is set (with ``HF_OIDC_ID_TOKEN``), then ``HF_TOKEN`` or
``HUGGING_FACE_HUB_TOKEN``, then the file at ``HF_TOKEN_PATH`` (constants.py; by default
``$HF_HOME/token``, where ``hf auth login`` keeps it, read at import), then Google Colab's vault
(inside a Colab kernel only). fintts's Hub store also asks Kaggle's secrets
(fintts/train/stores/hub/auth.py ``find_token``), which ``kaggle_secrets`` reaches with the JWT in
``KAGGLE_USER_SECRETS_TOKEN`` (Kaggle/docker-python patches/kaggle_web_client.py,
``KaggleWebClient.__init__``). So those variables are left out and ``HF_TOKEN_PATH`` names a file
that does not exist; ``HF_HOME`` stays, so the downloads' cache is still shared.

What the task reads from the Hub (a ``data: hf://datasets/…`` corpus, an ``init`` voice, released
weights) may still be private: the main process fetches it into the shared cache and the others read
it from there at the commit it resolved, never asking the Hub (the task's ``context.fetch_first``:
:func:`fintts.train.processes.collective.main_first`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

#: The variables through which a process can reach the Hugging Face token (see the module).
HUB_TOKEN_VARIABLES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE", "HF_OIDC_ID_TOKEN", "KAGGLE_USER_SECRETS_TOKEN")


def without_hub_token(env: Mapping[str, str], nowhere: Path) -> dict[str, str]:
    """``env`` less :data:`HUB_TOKEN_VARIABLES`, its token file moved to ``nowhere`` (a path in an empty private folder,
    where no token file is: the cached login stays out of reach)."""
    kept = {name: value for name, value in env.items() if name not in HUB_TOKEN_VARIABLES}
    kept["HF_TOKEN_PATH"] = str(nowhere)
    return kept
