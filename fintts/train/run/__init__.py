"""What outlives a session: a checkpoint's files (written and read here), the trainer's state, best and patience, what
drifted in the data.
"""
