"""The largest values numeric settings may take, so that an extreme one is refused by name.

A setting past these is a typo or a test of the limits, never a run: a count of env steps
beyond ``MAX_STEPS`` would take longer than a machine lasts, a learning rate above
``MAX_LR`` diverges at the first update, and numbers this large overflow the fixed-width
integers and floats they end up in (a rating update, a seed, a NumPy counter) with a
traceback far from the setting. Sizes that cost memory (copies, buffers, widths) are also
checked against the memory free before anything is allocated.
"""

MAX_STEPS = 10**15
"""Env steps: run lengths, intervals, schedules."""
MAX_SIZE = 2**31 - 1
"""Rows, copies, widths: what indexes an array (memory is checked separately)."""
MAX_COUNT = 10**6
"""Repetitions and small counts: epochs, games, generations, restarts, snapshots kept."""
MAX_LR = 1.0
"""Learning rates (Adam's step size)."""
MAX_COEF = 1_000.0
"""Loss weights, noise scales and temperatures."""
MAX_THREADS = 1024
"""Threads, worker processes, CPUs and GPUs one run asks for."""
