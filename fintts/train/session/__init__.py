"""One session from its start to its exit: the Trainer's story (loop), saving a checkpoint, the slow part of an export
in a child process, the watchdog on the clock, and the launch of one process per device. Nothing below it (step,
run, processes, report, machine, stores) imports it.
"""
