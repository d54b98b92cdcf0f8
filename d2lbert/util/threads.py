"""MXNet's CPU thread count must be set before MXNet is imported."""
import os


def default_num_threads():
    """The cores this process may use (respects CPU affinity, e.g. in containers)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def set_default_threads():
    """Set OMP_NUM_THREADS to the available cores unless the user chose a value.

    Measured on a 2-core machine: MXNet 1.9.1 otherwise runs one OpenMP thread and
    is about 2x slower. Has no effect if MXNet was imported before d2lbert.
    """
    os.environ.setdefault('OMP_NUM_THREADS', str(default_num_threads()))
