"""MXNet's CPU threads must be set up before MXNet is imported.

Two settings, both of OpenMP (libgomp), which runs MXNet's operators, oneDNN and
d2lbert's own kernels (`d2lbert/fast/kernels/`, plain `#pragma omp parallel` loops):

* how many threads: OMP_NUM_THREADS, the usable cores;
* what a thread does when it waits (at the end of every parallel loop, for the other
  threads of its team; between loops, for the next one): GOMP_SPINCOUNT=1000, it spins
  about 1,000 iterations (a few microseconds), then sleeps. libgomp's default is
  300,000. Alone on the machine, spinning saves a wake-up at each of the hundreds of
  parallel loops of a step; but when other processes share the cores, a long-spinning
  thread burns the time slice that the thread it waits for needs. Measured on 2 cores,
  two 2-thread pretraining runs at once (chapter_bert/studies/concurrent_runs.py,
  docs/performance.md, pairs/s of each against one alone): spinning 300,000 (the old
  default) 0.11 of alone, 30,000 0.04, 10,000 0.12, 3,000 0.27, 1,000 0.46-0.50,
  never spinning (OMP_WAIT_POLICY=PASSIVE) 0.86-1.05 but alone 25% slower (1,469-1,851
  against 2,303-2,458 pairs/s); 1,000 is as fast alone as 300,000.
"""
import os

# The variables that decide how OpenMP threads wait (libgomp's GOMP_SPINCOUNT wins over
# OMP_WAIT_POLICY): a user who set either keeps their choice.
WAIT_VARIABLES = ('OMP_WAIT_POLICY', 'GOMP_SPINCOUNT')
SPIN_COUNT = 1000  # spins before a waiting OpenMP thread sleeps (the docstring)


def default_num_threads():
    """The cores this process may use (respects CPU affinity, e.g. in containers)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def set_default_threads():
    """Set OMP_NUM_THREADS to the available cores and GOMP_SPINCOUNT to
    SPIN_COUNT, unless the user chose values.

    Measured on a 2-core machine: MXNet 1.9.1 otherwise runs one OpenMP thread and
    is about 2x slower; and spinning threads make runs that share the cores collapse
    (the module's docstring). Has no effect once MXNet is imported: the commands call
    it (through `util.process.configure_cpu`) before they import MXNet.
    """
    os.environ.setdefault('OMP_NUM_THREADS', str(default_num_threads()))
    if not any(name in os.environ for name in WAIT_VARIABLES):
        os.environ['GOMP_SPINCOUNT'] = str(SPIN_COUNT)
