"""How a fine-tuning task reads its data (the `reader` of a `tasks.Task`):

    NamedTaskFiles   a task of `data.tasks` (`load_task`): --data is a folder holding
                     its split files under their usual names (or one training file);
                     without --data they are downloaded where they can be
    OwnTaskFile      your own .csv, .tsv, .jsonl or .json file (`data.tasks.read_task_file`)
    SquadFiles       SQuAD JSON files (`qa_task` reads them), downloaded without --data

The dev set is --dev, else the task's dev split in the --data folder (if there is one).
A reader has `train(data, label_type)`, `dev(data, dev, train_labels, label_type)` (None:
no dev set) and `file(path, labels, label_type)` (any file of the task, e.g. for `d2lbert
predict`), and says whether a task needs --data (`needs_data`: what to give) and which
names of --data or --dev it downloads (`downloadable`).
"""
import os

from ..data.squad import SQUAD_FILES
from ..data.tasks import load_task, read_task_file
from ..data.tasks.load import read_task_split


class NamedTaskFiles:
    """A task of `data.tasks.TASKS`, by its name there; dev_split: its dev split."""
    needs_data = None

    def __init__(self, name, dev_split='dev'):
        self.name, self.dev_split = name, dev_split

    def train(self, data, label_type='class'):
        return load_task(self.name, 'train', data)

    def dev(self, data, dev, train_labels, label_type='class'):
        if dev is not None:
            return read_task_split(self.name, dev)
        if data is not None and os.path.isfile(data):
            return None
        try:
            return load_task(self.name, self.dev_split, data)
        except FileNotFoundError:
            return None

    def file(self, path, labels, label_type='class'):
        return read_task_split(self.name, path)

    def downloadable(self, path):
        return False


class OwnTaskFile:
    """Your own files; the dev and other files take the training file's labels, so that
    class ids agree."""
    needs_data = ('your training file (.csv, .tsv, .jsonl or .json with text[, text_pair], label '
                  'columns)')

    def train(self, data, label_type='class'):
        return read_task_file(data, label_type)

    def dev(self, data, dev, train_labels, label_type='class'):
        return None if dev is None else read_task_file(dev, label_type, train_labels)

    def file(self, path, labels, label_type='class'):
        return read_task_file(path, label_type, labels)

    def downloadable(self, path):
        return False


class SquadFiles:
    """SQuAD's training and dev files (downloaded when --data is not given);
    unanswerable: whether questions may have no answer (SQuAD 2.0), the model then
    answering '' when its null odds exceed its threshold."""
    needs_data = None

    def __init__(self, train_file, dev_file, unanswerable):
        self.train_file, self.dev_file = train_file, dev_file
        self.unanswerable = unanswerable

    def downloadable(self, path):
        return path in SQUAD_FILES
