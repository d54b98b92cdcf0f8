"""An .npy file written as its rows come, for outputs too large to hold at once
(`numpy.save` takes the whole array): the header first, from the shape known in
advance, then each chunk of rows. `numpy.load` reads it like any .npy file."""
import numpy as onp
from numpy.lib import format as npy_format


def write_npy_rows(f, chunks, shape, dtype='float32'):
    """Write to the binary file `f` the .npy array of `shape` whose rows are those of
    the arrays `chunks` yields, in turn (each (rows, *shape[1:])); a ValueError if
    they do not hold shape[0] rows in all."""
    dtype = onp.dtype(dtype)
    npy_format.write_array_header_1_0(f, {'descr': npy_format.dtype_to_descr(dtype),
                                          'fortran_order': False, 'shape': tuple(shape)})
    written = 0
    for rows in chunks:
        if tuple(rows.shape[1:]) != tuple(shape[1:]) or written + len(rows) > shape[0]:
            raise ValueError(f'rows of shape {rows.shape} after {written} rows do not fit '
                             f'an array of shape {tuple(shape)}')
        f.write(onp.ascontiguousarray(rows, dtype=dtype).tobytes())
        written += len(rows)
    if written != shape[0]:
        raise ValueError(f'{written} rows written of the {shape[0]} announced')
