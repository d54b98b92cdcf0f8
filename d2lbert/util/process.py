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


def import_mxnet_without_sklearn():
    """Import MXNet for a command's process, without the scikit-learn that MXNet loads
    (when installed, as sentence-transformers installs it) only to derive its legacy
    `mxnet.model.FeedForward` from scikit-learn's `BaseEstimator`: scikit-learn brings
    pandas and SciPy's statistics, 0.5 to 0.7 s of every command's start on a Zen 3
    (docs/performance.md). No command uses FeedForward, and scikit-learn can be imported
    as usual afterwards. A library import of d2lbert leaves MXNet's imports as they are.
    Called before MXNet is imported (after it, `import mxnet` imports nothing)."""
    hidden = 'sklearn' not in sys.modules
    if hidden:
        sys.modules['sklearn'] = None  # so that `import sklearn` raises ImportError
    try:
        import mxnet  # noqa: F401
    finally:
        if hidden:
            del sys.modules['sklearn']
