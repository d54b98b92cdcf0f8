"""Each thing has one home (issue 44): the fine-tuning tasks are one table, so their
names appear as string literals in at most 3 of the package's files (the table
`finetuning.tasks`, GLUE's layouts and the data readers' table `data.tasks.load`)."""
import ast
import pathlib
import tokenize

from d2lbert.finetuning.tasks import TASKS

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
