"""Each thing has one home (issue 44): the fine-tuning tasks are one table, so their
names appear as string literals in at most 3 of the package's files (the table
`finetuning.tasks`, GLUE's layouts and the data readers' table `data.tasks.load`); the
options both training commands take are declared once (`run.training_options`), at
most 6 (those whose defaults differ) by both; every command's options live with it."""
import ast
import dataclasses
import pathlib
import tokenize

from d2lbert.finetuning.finetune import FinetuneOptions
from d2lbert.finetuning.tasks import TASKS
from d2lbert.pretraining.pretrain import PretrainOptions

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / 'd2lbert'


def task_names():
    """The names of `d2lbert finetune --task` and of `data.tasks` ('glue/mrpc', 'mrpc')."""
    names = set(TASKS)
    names |= {task.reader.name for task in TASKS.values() if hasattr(task.reader, 'name')}
    return names


def string_literals(path):
    """The values of the string literals of a Python file (docstrings included)."""
    with tokenize.open(path) as f:
        tokens = list(tokenize.generate_tokens(f.readline))
    values = set()
    for token in tokens:
        if token.type == tokenize.STRING and not token.string.lstrip('rbuRBU').startswith(
                ('f', 'F')):
            values.add(ast.literal_eval(token.string))
    return values


def files_with_task_literals():
    names = task_names()
    return sorted(str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob('*.py')
                  if string_literals(path) & names)


def test_task_names_are_literals_in_three_files_at_most():
    assert {'snli', 'glue/mrpc', 'mrpc', 'csv', 'squad2', 'conll2003'} <= task_names()
    files = files_with_task_literals()
    assert len(files) <= 3, files


def declared_by(options_class):
    """The fields a class declares itself (not those it inherits)."""
    return set(vars(options_class).get('__annotations__', {}))


def test_the_training_commands_declare_at_most_6_options_twice():
    twice = declared_by(PretrainOptions) & declared_by(FinetuneOptions)
    assert len(twice) <= 6, sorted(twice)
    shared = ({field.name for field in dataclasses.fields(PretrainOptions)}
              & {field.name for field in dataclasses.fields(FinetuneOptions)})
    assert {'lr', 'clip', 'seed', 'precision', 'gpus', 'out', 'resume'} <= shared - twice


def test_every_commands_options_live_with_the_command():
    """cli.py declares no options class (and calls no `option`): each command's are in
    the command's module."""
    tree = ast.parse((PACKAGE / 'cli.py').read_text(encoding='utf-8'))
    assert not [node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
    assert not [node for node in ast.walk(tree) if isinstance(node, ast.Call)
                and getattr(node.func, 'id', None) == 'option']


def functions_longer_than(limit):
    """(file, function, lines) of every function or method of the package longer than
    `limit` lines (its decorators, signature, docstring and body)."""
    long = []
    for path in PACKAGE.rglob('*.py'):
        for node in ast.walk(ast.parse(path.read_text(encoding='utf-8'))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    long.append((str(path.relative_to(PACKAGE)), node.name, lines))
    return long


def test_no_function_is_over_60_lines():
    """A function a student can hold in their head: none of the package's over 60 lines."""
    assert functions_longer_than(60) == []
