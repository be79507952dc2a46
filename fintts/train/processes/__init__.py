"""Several processes (one per GPU) agreeing: waits off the device, and the smoke test before training.
"""
