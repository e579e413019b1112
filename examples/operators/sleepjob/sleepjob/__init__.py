"""The SleepJob operator, written on kubetrain.common: the kind in `kind.py`, `python -m sleepjob` runs it."""
