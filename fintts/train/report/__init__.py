"""What a person reads: the status, the session's summary, the run's card and loss plot, metrics, progress bars.
"""
