"""Stand-ins for outside services: a supported part of fintts, for testing code that uses it offline.

:class:`~fintts.testing.hub_server.HubServer` is a local Hugging Face Hub that the real
``huggingface_hub`` client talks to, with switches for the faults a Kaggle session meets;
:class:`~fintts.testing.kaggle_server.KaggleServer` is a local Kaggle (kernels pushed and
run, their state and log, the GPU quota, datasets uploaded) for the real ``kaggle`` client.
fintts's own tests and benchmarks use them; so can yours (see the README, "How it is built").
"""

from fintts.testing.hub_server import HubServer
from fintts.testing.kaggle_server import KaggleServer

__all__ = ["HubServer", "KaggleServer"]
