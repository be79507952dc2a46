"""The machine a session runs on: the platform (Kaggle, Colab, a laptop) and when its session started, and
`fintts env`'s report of both. The session's clock, which plans the session's end from that start, is the session's
own (:mod:`fintts.train.session.clock`).
"""
