"""Stand-ins for what fintts's tests and benchmarks need from outside: test code, not part of fintts.

:class:`~fintts_stand_ins.hub_server.HubServer` is a local Hugging Face Hub that the real
``huggingface_hub`` client talks to, with switches for the faults a Kaggle session meets;
:class:`~fintts_stand_ins.kaggle_server.KaggleServer` is a local Kaggle (kernels pushed and
run, their state and log, the GPU quota, datasets uploaded) for the real ``kaggle`` client.
:mod:`.played_time` runs ``fintts kaggle run`` on a clock that plays Kaggle's hours in seconds.
They speak as much of each service's API as the installed clients use, checked only by
fintts's own tests against the client versions CI installs: no promise beyond that.

:mod:`.toy` and :mod:`.faulty` are the session trainer's test tasks, registered as ``toy``
and ``faulty-toy`` by this distribution's ``fintts.tasks`` entry points (``pip install -e
tests/stand_ins``), so that fintts itself registers only the tasks a user can train.
"""

from fintts_stand_ins.hub_server import HubServer
from fintts_stand_ins.kaggle_server import KaggleServer

__all__ = ["HubServer", "KaggleServer"]
