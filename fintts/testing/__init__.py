"""Stand-ins for outside services: a supported part of fintts, for testing code that uses it offline.

:class:`~fintts.testing.hub_server.HubServer` is a local Hugging Face Hub that the real
``huggingface_hub`` client talks to, with switches for the faults a Kaggle session meets.
fintts's own tests and benchmarks use it; so can yours (see the README, "How it is built").
"""

from fintts.testing.hub_server import HubServer

__all__ = ["HubServer"]
