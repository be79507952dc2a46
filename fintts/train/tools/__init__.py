"""Tools about a run rather than in it, which run sessions of their own: the bench and the planner.
"""
