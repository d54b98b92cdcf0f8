"""A command's options, each declared once: a dataclass field that carries its flag's
help text and its check besides its default; the command-line parser is generated from
the fields, and constructing the options runs the checks::

    @dataclasses.dataclass
    class PretrainOptions(Options):
        steps: int = option(500, 'optimizer steps in total', integer(1))

gives `d2lbert pretrain --steps N` ("optimizer steps in total (default: 500)"), and
`PretrainOptions(steps=0)` and `--steps 0` both fail with "--steps must be an integer
>= 1, got 0". A bool field is a switch: `--cpu` sets a False default, `--no-progress`
clears a True one. Checks that involve several fields go in `check_together`.
"""
import argparse
import dataclasses
import functools

from ..util.options import (check_bool, check_choice, check_choices, check_int,
                            check_number, check_text, flag)


def option(default, help, check=None, *, cli=True, required=False, parse=None,
           shown_default=None, positional=False, metavar=None):
    """A field of an `Options` dataclass.

    help: the flag's help text; check(name, value) raises a ValueError for a bad value
    (bool fields are checked to be bools); cli=False: a setting of the Python API only;
    required: the flag must be given; parse: turns the flag's text into the value (by
    default the field's type); shown_default: the default as the help shows it;
    positional: an argument without a flag; metavar: how the help names the value.
    """
    return dataclasses.field(default=default, metadata=dict(
        help=help, check=check, cli=cli, required=required, parse=parse,
        shown_default=shown_default, positional=positional, metavar=metavar))


def integer(minimum, maximum=None, note=''):
    """The check of an integer option in [minimum, maximum]."""
    return functools.partial(check_int, minimum=minimum, maximum=maximum, note=note)


def number(minimum, inclusive=True, note=''):
    """The check of a finite real option >= minimum (> minimum if not inclusive)."""
    return functools.partial(check_number, minimum=minimum, inclusive=inclusive, note=note)


def fraction(name, value):
    """The check of a share: a number in [0, 1)."""
    check_number(name, value, 0)
    if value >= 1:
        raise ValueError(f'{name} must be in [0, 1), got {value!r}')
    return value


def optional(check):
    """A check that also accepts None (the option not given)."""
    def check_optional(name, value):
        return value if value is None else check(name, value)
    return check_optional


def choice(choices):
    return functools.partial(check_choice, choices=tuple(choices))


def choices(allowed):
    """The check of a tuple of items of allowed (given comma-separated on the CLI)."""
    return functools.partial(check_choices, choices=tuple(allowed))


def text(optional=False):
    return functools.partial(check_text, optional=optional)


def comma_separated(value):
    """'book,small' -> ('book', 'small'): how a tuple option is given on the CLI."""
    return tuple(value.split(','))


class Options:
    """The base of a command's options dataclass (see the module doc).

    defaults_shown: {field: text}, how this command's help shows the default of a field
    declared by a base class shared with other commands (e.g. `TrainingOptions.out`);
    required_here: the fields of such a base that this command requires.
    """
    defaults_shown = {}
    required_here = ()

    @classmethod
    def is_required(cls, field):
        """Whether the flag of `field` must be given to this command."""
        return field.metadata.get('required', False) or field.name in cls.required_here

    def __post_init__(self):
        self.validate()

    @classmethod
    def option_name(cls, field):
        """How messages name a field: its flag (a positional argument: its name), or
        Class.field for an API-only one."""
        if not field.metadata.get('cli', True):
            return f'{cls.__name__}.{field.name}'
        return field.name if field.metadata.get('positional') else flag(field.name)

    def validate(self):
        """Raise a `ValueError` naming the flag of the first invalid setting."""
        for field in dataclasses.fields(self):
            check = field.metadata.get('check') or (check_bool if field.type is bool
                                                    else None)
            if check is not None:
                check(self.option_name(field), getattr(self, field.name))
        self.check_together()

    def check_together(self):
        """The checks that involve several fields (none here)."""

    @classmethod
    def add_arguments(cls, parser, only_given=False):
        """One argument of `parser` (an argparse parser) per CLI field; only_given: the
        parsed arguments hold only the flags given (the defaults are left to the caller,
        and `from_arguments` checks that the required ones were given). The command's
        own fields come first, then those of the base it shares with other commands."""
        own = vars(cls).get('__annotations__', {})
        for field in sorted(dataclasses.fields(cls), key=lambda field: field.name not in own):
            meta = field.metadata
            if not meta.get('cli', True):
                continue
            if field.type is bool:
                name = flag(field.name) if not field.default else f'--no-{field.name}'
                action = 'store_false' if field.default else 'store_true'
                parser.add_argument(name.replace('_', '-'), dest=field.name, action=action,
                                    help=meta['help'],
                                    default=argparse.SUPPRESS if only_given else field.default)
                continue
            shown = field.default if meta['shown_default'] is None else meta['shown_default']
            shown = cls.defaults_shown.get(field.name, shown)
            text = meta['help'] if shown is None else f'{meta["help"]} (default: {shown})'
            if meta['positional']:
                parser.add_argument(field.name, type=meta['parse'] or field.type, help=text,
                                    nargs=None if cls.is_required(field) else '?')
                continue
            parser.add_argument(
                flag(field.name), dest=field.name, metavar=meta['metavar'],
                default=argparse.SUPPRESS if only_given else field.default,
                type=meta['parse'] or field.type, required=cls.is_required(field) and not only_given,
                help=text)

    @classmethod
    def given_in(cls, args):
        """{field: value} of the CLI fields in parsed arguments."""
        return {field.name: getattr(args, field.name) for field in dataclasses.fields(cls)
                if field.metadata.get('cli', True) and hasattr(args, field.name)}

    @classmethod
    def from_arguments(cls, args, recorded=None):
        """The options of parsed arguments: the flags given, else their values in
        `recorded` ({field: value}, e.g. what a run recorded: `--resume`), else the
        defaults. A required flag given in neither raises a ValueError."""
        names = {field.name for field in dataclasses.fields(cls)}
        values = {name: value for name, value in (recorded or {}).items() if name in names}
        values.update(cls.given_in(args))
        missing = [cls.option_name(field) for field in dataclasses.fields(cls)
                   if cls.is_required(field) and values.get(field.name) is None]
        if missing:
            raise ValueError(f'{", ".join(missing)}: required (or --resume of a run in '
                             '--out, which recorded it)' if 'resume' in names else
                             f'{", ".join(missing)}: required')
        return cls(**values)
