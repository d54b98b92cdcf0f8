"""MXNet's CPU threads must be set up before MXNet is imported.

Two settings, both of OpenMP (libgomp), which runs MXNet's operators, oneDNN and
d2lbert's own kernels (`d2lbert/fast/kernels/`, plain `#pragma omp parallel` loops):

* how many threads: OMP_NUM_THREADS, the usable cores;
* what a thread does when it waits (at the end of every parallel loop, for the other
  threads of its team; between loops, for the next one): OMP_WAIT_POLICY=PASSIVE, it
  sleeps at once. libgomp's default is to spin, about 300,000 iterations, before
  sleeping. Alone on the machine, spinning only saves a wake-up; but when other
  processes share the cores, a spinning thread burns the time slice that the thread it
  waits for needs, and every one of the hundreds of parallel loops of a step waits for
  the scheduler to run all threads of the team at once. Measured on 2 cores
  (chapter_bert/tools/concurrent_runs.py, docs/performance.md): two 2-thread
  pretraining runs at once fell to 1-2% of their alone speed (133x slower, where
  sharing costs 2x); a 2-thread run beside other busy processes fell to 18-43 pairs/s,
  against 360-1,700 with PASSIVE in the same minutes.
"""
import os

# The variables that decide how OpenMP threads wait (libgomp's GOMP_SPINCOUNT wins over
# OMP_WAIT_POLICY): a user who set either keeps their choice.
WAIT_VARIABLES = ('OMP_WAIT_POLICY', 'GOMP_SPINCOUNT')


def default_num_threads():
    """The cores this process may use (respects CPU affinity, e.g. in containers)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def set_default_threads():
    """Set OMP_NUM_THREADS to the available cores and OMP_WAIT_POLICY to PASSIVE,
    unless the user chose values.

    Measured on a 2-core machine: MXNet 1.9.1 otherwise runs one OpenMP thread and
    is about 2x slower; and spinning threads make runs that share the cores collapse
    (the module's docstring). Has no effect if MXNet was imported before d2lbert.
    """
    os.environ.setdefault('OMP_NUM_THREADS', str(default_num_threads()))
    if not any(name in os.environ for name in WAIT_VARIABLES):
        os.environ['OMP_WAIT_POLICY'] = 'PASSIVE'
