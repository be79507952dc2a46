"""The machine a session runs on: the platform (Kaggle, Colab, a laptop) and when its session started. The session's
clock, which plans the session's end from that start, is the session's own (:mod:`fintts.train.session.clock`);
`fintts env`'s report of the machine and the Hub is a tool's (:mod:`fintts.train.tools.environment`), since it asks the
Hub store's room for the token and the stores stand on this room's platform facts, not the other way round.
"""
