"""Checks of a command's options, done before any work starts. Each check raises one
`ValueError` that names the option, shows the value and says what is allowed::

    --lr must be a finite number > 0, got nan

The options dataclasses (`run.options`: `PretrainOptions`, `FinetuneOptions`,
`BenchOptions`) call these checks, so the command line and the Python API refuse a bad
value with the same message.
"""
import math
import numbers
import os


def flag(field):
    """The command-line flag of an options field: 'batch_size' -> '--batch-size'."""
    return '--' + field.replace('_', '-')


def check_int(name, value, minimum, maximum=None, note=''):
    """value must be an integer (not a bool) in [minimum, maximum]; note tells what
    a special value means, e.g. ' (0: off)'."""
    allowed = (f'an integer >= {minimum}' if maximum is None
               else f'an integer in [{minimum}, {maximum}]')
    if (isinstance(value, bool) or not isinstance(value, numbers.Integral)
            or value < minimum or (maximum is not None and value > maximum)):
        raise ValueError(f'{name} must be {allowed}{note}, got {value!r}')
    return value


def check_number(name, value, minimum, inclusive=True, note=''):
    """value must be a finite real number >= minimum (> minimum if not inclusive)."""
    bound = f'>= {minimum}' if inclusive else f'> {minimum}'
    if (isinstance(value, bool) or not isinstance(value, numbers.Real)
            or not math.isfinite(value) or value < minimum
            or (value == minimum and not inclusive)):
        raise ValueError(f'{name} must be a finite number {bound}{note}, got {value!r}')
    return value


def check_choice(name, value, choices):
    """value must be one of choices."""
    if value not in choices:
        raise ValueError(f'{name} must be one of {", ".join(choices)}, got {value!r}')
    return value


def check_choices(name, values, choices):
    """values must be a non-empty tuple or list of items of choices."""
    if (not isinstance(values, (tuple, list)) or not values
            or any(value not in choices for value in values)):
        shown = ','.join(map(str, values)) if isinstance(values, (tuple, list)) else values
        raise ValueError(f'{name} must be one or more of {", ".join(choices)} '
                         f'(comma-separated), got {shown!r}')
    return values


def check_bool(name, value):
    if not isinstance(value, bool):
        raise ValueError(f'{name} must be True or False, got {value!r}')
    return value


def check_text(name, value, optional=False):
    """value must be a non-empty string (or None if optional)."""
    if optional and value is None:
        return value
    if not isinstance(value, str) or not value:
        raise ValueError(f'{name} must be a non-empty string, got {value!r}')
    return value


def check_folder(name, path):
    """A folder the command reads: it must exist."""
    check_text(name, path)
    if not os.path.isdir(path):
        raise ValueError(f'{name} {path} is not a folder')
    return path


def check_output_file(name, path):
    """A file the command writes at the end: its folder must exist now (so that hours
    of work are not lost to a typo), and it must not be a folder."""
    check_text(name, path)
    folder = os.path.dirname(path) or '.'
    if not os.path.isdir(folder):
        raise ValueError(f'{name} {path}: the folder {folder} does not exist')
    if os.path.isdir(path):
        raise ValueError(f'{name} {path} is a folder; give a file name')
    return path
