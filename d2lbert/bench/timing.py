"""Timing a training step fairly, and a process's peak memory.

MXNet runs operators asynchronously: a Python call returns as soon as the work is
queued. So the clock only stops after `waitall()` (everything queued has finished).
The first steps are slower (memory allocation, graph building of hybridized blocks,
oneDNN kernel selection): they are run before the clock starts.
"""
import resource
import time


def time_steps(step, num_steps, warmup, waitall):
    """Seconds that `num_steps` calls of `step()` take, after `warmup` untimed calls.

    `waitall` blocks until MXNet's queue is empty (`mx.nd.waitall`).
    """
    for _ in range(warmup):
        step()
    waitall()
    start = time.perf_counter()
    for _ in range(num_steps):
        step()
    waitall()
    return time.perf_counter() - start


def best_time(function, repeats, waitall):
    """The shortest of `repeats` timed calls of `function()` (the least disturbed by
    other processes on the machine)."""
    best = float('inf')
    for _ in range(repeats):
        waitall()
        start = time.perf_counter()
        function()
        waitall()
        best = min(best, time.perf_counter() - start)
    return best


def interleaved_best_times(functions, repeats, waitall):
    """{name: the shortest of `repeats` timed calls of functions[name]()}, called in
    rounds (each function once per round) so that a slow moment of the machine does not
    fall on all the calls of one function."""
    best = dict.fromkeys(functions, float('inf'))
    for _ in range(repeats):
        for name, function in functions.items():
            best[name] = min(best[name], best_time(function, 1, waitall))
    return best


def peak_rss_mb():
    """The highest resident memory of this process so far, in MiB (Linux: ru_maxrss is
    in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
