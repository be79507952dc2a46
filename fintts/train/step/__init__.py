"""One optimizer step, with no session in sight: the phase's models and optimizers built, precision and autocast, the
step itself, its guard against bad steps, the resumable sampler, seeds, memory.
"""
