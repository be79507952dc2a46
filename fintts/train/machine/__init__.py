"""The machine a session runs on and its clock: the platform (Kaggle, Colab, a laptop) and when its session started,
the session clock, and `fintts env`'s report of both.
"""
