"""Tools about a run rather than in it: the bench and the planner, which run sessions of their own, and `fintts env`,
which checks the machine and the Hub before a session relies on them.
"""
