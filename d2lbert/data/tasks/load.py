"""``load_task``: one split of a task by name, from a local copy or downloaded.

    >>> data = load_task('snli', 'dev')                       # doctest: +SKIP
    >>> data.examples[0], data.labels, data.num_dropped       # doctest: +SKIP
    (TaskExample(text='Two women are embracing ...', text_pair='The sisters
     are hugging ...', label='neutral'), ('entailment', 'contradiction',
     'neutral'), 158)
"""
import os

from .archives import NOT_DOWNLOADABLE, task_directory
from .conll import CONLL2003_SPLITS, read_conll2003
from .glue import GLUE_LAYOUTS, glue_file_name, read_glue
from .snli import read_snli, snli_file_name

TASKS = ('snli', *GLUE_LAYOUTS, 'conll2003')


def load_task(task, split='train', data=None, base_url=None, sha1=None):
    """Read ``split`` of ``task`` into a :class:`.examples.TaskData`.

    Args:
        task: one of :data:`TASKS`: 'snli', a GLUE task ('cola', 'sst2',
            'mrpc', 'stsb', 'qqp', 'mnli', 'qnli', 'rte', 'wnli') or
            'conll2003'. For your own files use
            :func:`.custom.read_task_file`.
        split: 'train', 'dev' or 'test'; for MNLI 'train', 'dev_matched',
            'dev_mismatched', 'test_matched' or 'test_mismatched'.
        data: None to download the task (see :mod:`.archives`), a folder
            holding its split files under their usual names, or one file
            (``split`` is then ignored).
        base_url, sha1: for the download, see :func:`.archives.task_directory`.
    """
    if task not in TASKS:
        raise ValueError(f'unknown task {task!r}; choose one of {TASKS}')
    if data is not None and os.path.isfile(data):
        path = data
    else:
        if data is None:
            data = task_directory(task, base_url, sha1)
        elif not os.path.isdir(data):
            raise FileNotFoundError(f'the data {data!r} is neither a file '
                                    f'nor a folder')
        path = split_file(task, split, data)
    return read_task_split(task, path)


def split_file(task, split, directory):
    """The file of ``split`` in the folder ``directory`` of ``task``."""
    if task == 'conll2003':
        if split not in CONLL2003_SPLITS:
            raise ValueError(f'CoNLL-2003 has the splits '
                             f'{tuple(CONLL2003_SPLITS)}, not {split!r}')
        names = CONLL2003_SPLITS[split]
    elif task == 'snli':
        names = (snli_file_name(split),
                 snli_file_name(split).replace('.jsonl', '.txt'))
    else:
        names = (glue_file_name(task, split),)
    for name in names:
        if os.path.isfile(os.path.join(directory, name)):
            return os.path.join(directory, name)
    hint = NOT_DOWNLOADABLE.get(task, '')
    raise FileNotFoundError(f'{directory} holds none of {list(names)}, the '
                            f'{task} {split} file. {hint}'.rstrip())


def read_task_split(task, path):
    """Read the file ``path`` with the reader of ``task``."""
    if task == 'snli':
        return read_snli(path)
    if task == 'conll2003':
        return read_conll2003(path)
    return read_glue(task, path)
