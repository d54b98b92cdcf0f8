"""What a d2lbert command sets up in its own process before MXNet loads.

`import d2lbert` changes nothing of the process: a library must not. The commands
(`d2lbert ...`, `python -m d2lbert ...`) and the bench's workers call
:func:`configure_cpu` first thing; a library user who wants the same settings calls
it too, before anything imports MXNet::

    import d2lbert
    d2lbert.configure_cpu()           # threads and OpenBLAS core, as the commands run
    from d2lbert import BERTModel     # MXNet loads here
"""
import sys
import warnings

from .blas import set_blas_core
from .threads import set_default_threads


def configure_cpu() -> bool:
    """Set OMP_NUM_THREADS, GOMP_SPINCOUNT (`.threads`) and OPENBLAS_CORETYPE (`.blas`)
    where the user has not, for MXNet to read when it loads.

    Returns True if MXNet was not loaded yet (the settings take effect), else False
    with a warning: OpenMP and OpenBLAS read these variables once, when MXNet loads.

        import d2lbert
        d2lbert.configure_cpu()   # first thing, before mxnet is imported
    """
    if 'mxnet' in sys.modules:
        warnings.warn('d2lbert.configure_cpu() has no effect once MXNet is imported: '
                      'call it before the first import of mxnet or a d2lbert block',
                      RuntimeWarning, stacklevel=2)
        return False
    set_default_threads()
    set_blas_core()
    return True


# Modules MXNet imports when they are installed, for features no command uses: each
# name is hidden from MXNet's import in a command's process (`import_mxnet_for_a_command`)
UNUSED_BY_COMMANDS = ('sklearn', 'scipy.stats', 'scipy.sparse')


def import_mxnet_for_a_command():
    """Import MXNet for a command's process without the modules UNUSED_BY_COMMANDS,
    which MXNet loads, when installed, only for features no command uses:
    - scikit-learn (as sentence-transformers installs it), for `mxnet.model`'s legacy
      `FeedForward`, derived from scikit-learn's `BaseEstimator`; it brings pandas and
      SciPy's statistics, 0.5 to 0.7 s of every command's start on a Zen 3;
    - SciPy's statistics, for the entropy calibration of `mxnet.contrib.quantization`
      (d2lbert calibrates its int8 products its own way, `fast.int8`) and for
      `mxnet.test_utils`, and SciPy's sparse matrices, for turning them into MXNet's:
      together 0.4 s more (docs/performance.md).
    Each can be imported as usual afterwards. A library import of d2lbert leaves MXNet's
    imports as they are. Called before MXNet is imported (after it, `import mxnet`
    imports nothing)."""
    hidden = [name for name in UNUSED_BY_COMMANDS if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # so that importing it raises ImportError
    try:
        import mxnet  # noqa: F401
    finally:
        for name in hidden:
            del sys.modules[name]
