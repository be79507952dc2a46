"""Stand-ins for outside services, shipped in the package so tests and benchmarks share them.

:class:`~fintts.testing.hub_server.HubServer` is a local Hugging Face Hub that the real
``huggingface_hub`` client talks to, with switches for the faults a Kaggle session meets.
"""

from fintts.testing.hub_server import HubServer

__all__ = ["HubServer"]
