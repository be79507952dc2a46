"""Which commits carry the run's card (``README.md``), and only a card the Hub accepts.

The Hub validates the metadata of ``README.md`` on every commit that carries it and refuses the
whole commit when one field does not pass, and its rules tighten over time (a field accepted
last month may be refused today). A card in every heartbeat would so let one bad field stop
every commit of a session, the lease's among them. So the card's metadata is checked with the
Hub's validator the first time a session is about to send it (and again only when the metadata
itself changes), a card the Hub refuses is left out of every commit with one loud warning, and
a card rides only in commits that change it (full pushes and the release, never heartbeats).
A commit refused for its card (the validator and the commit may disagree) drops it too.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from pathlib import Path

from fintts.train.run.layout import CARD
from fintts.train.stores.hub.client import HubClient

log = logging.getLogger(__name__)


class CardGate:
    """This session's account of the card: what the Hub has, and whether its metadata passed."""

    def __init__(self, client: HubClient):
        self._client = client
        self._lock = threading.Lock()
        self._sent: str | None = None  # sha256 of the card the Hub holds (as far as this session knows)
        self._checked: dict[str, str | None] = {}  # sha256 of a front matter -> the Hub's complaint (None: accepted)

    def wanted(self, card: Path) -> bytes | None:
        """``card``'s content when a commit should carry it: it exists, differs from the Hub's and its metadata passed."""
        try:
            content = card.read_bytes()
        except OSError:
            return None
        with self._lock:
            if hashlib.sha256(content).hexdigest() == self._sent:
                return None
        return content if self._accepted(content) else None

    def sent(self, content: bytes) -> None:
        """A commit carrying ``content`` landed."""
        with self._lock:
            self._sent = hashlib.sha256(content).hexdigest()

    def refused(self, content: bytes, reason: str) -> None:
        """A commit carrying ``content`` was refused for the card: leave this metadata out from now on."""
        with self._lock:
            self._checked[_front_matter_key(content)] = reason
        log.error("%s: the Hub refused the run's %s (%s); it is left out of this session's commits", self._client.url, CARD, reason)

    def problem(self) -> str | None:
        """The Hub's complaint about the card's metadata, if it refused one this session."""
        with self._lock:
            return next((f"the Hub refused the run's {CARD}: {r}" for r in self._checked.values() if r), None)

    def _accepted(self, content: bytes) -> bool:
        key = _front_matter_key(content)
        with self._lock:
            if key in self._checked:
                return self._checked[key] is None
        try:
            complaint = self._client.card_problem(content.decode("utf-8", errors="replace"))
        except Exception as err:  # the validator unreachable: send the card; a refused commit still drops it
            log.info("%s: could not validate %s (%s); sending it unchecked", self._client.url, CARD, self._client.failure(err))
            return True
        with self._lock:
            self._checked[key] = complaint
        if complaint:
            log.error(
                "%s: the Hub does not accept the metadata of the run's %s (%s); the page is left out of this session's "
                "commits (checkpoints, status and lease are pushed as usual)", self._client.url, CARD, complaint,
            )
        return complaint is None


def _front_matter_key(content: bytes) -> str:
    """A hash of the card's YAML front matter (what the Hub validates); the body changes with every status."""
    text = content.decode("utf-8", errors="replace")
    front = text.split("\n---", 1)[0] if text.startswith("---") else ""
    return hashlib.sha256(front.encode()).hexdigest()
