"""The Hugging Face Hub store (``hub_repo: user/name``): a run that outlives every Kaggle session.

Rooms with one job each:

- :mod:`.auth` — where the token comes from, and keeping it out of everything written;
- :mod:`.errors` — Hub failures as exceptions that say whether retrying can help;
- :mod:`.client` — :class:`HubClient`, the one route to the Hub, and the retry loop;
- :mod:`.lease` — ``lease.json``: which session writes the run, and the commit lock on the branch head;
- :mod:`.ledger` — what this session knows the Hub holds, behind the lock it shares with the push thread;
- :mod:`.commits` — what each commit carries, and the snapshots (outbox) a full push sends;
- :mod:`.card_gate` — which commits carry the run's card, and only one whose metadata the Hub accepts;
- :mod:`.resume` — where a session resumes from, downloading the newest checkpoint from the Hub;
- :mod:`.publisher` — the background worker: when to push, retries, heartbeats (its two threads);
- :mod:`.store` — :class:`HubStore`, the :class:`~fintts.train.stores.base.Store` the trainer uses;
- :mod:`.visibility` — an existing public repo refused unless asked for (a run's, ``fintts publish``'s);
- :mod:`.transfer` — ``fintts push`` and ``fintts pull``.
"""

from fintts.train.stores.hub.client import HubClient
from fintts.train.stores.hub.errors import HubAuthError, HubError, HubRepoError, HubUnavailable, LeaseLost
from fintts.train.stores.hub.store import HubStore
from fintts.train.stores.hub.transfer import pull, push

__all__ = [
    "HubAuthError", "HubClient", "HubError", "HubRepoError", "HubStore", "HubUnavailable", "LeaseLost", "pull", "push",
]
