"""The book's build when a notebook fails, and the order it runs the notebooks in
(chapter_bert/tools/build_book.py and run_d2lbook.py), without d2lbook or a kernel: the
error a failed notebook leaves is what the build prints, and the pretraining section,
whose model the later sections load, runs alone before them."""
import importlib.util
import os
import subprocess

import nbformat
import pytest
from nbclient.exceptions import CellExecutionError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = os.path.join(ROOT, 'chapter_bert', 'tools')


def load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(TOOLS, f'{name}.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


run_d2lbook, build_book = load('run_d2lbook'), load('build_book')


def notebook_that_printed(text):
    notebook = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell('print(...)')
    cell.outputs = [nbformat.v4.new_output('stream', name='stdout', text=text)]
    notebook.cells = [cell]
    return notebook


def failing_job(error):
    def job(notebook, output_fn, *args):
        raise error
    return job


def test_a_failing_cell_leaves_its_cell_and_traceback(tmp_path):
    traceback = ('\x1b[0;31mValueError\x1b[0m: runs/bert-pretrained holds files\n'
                 'Cell In[3], line 5\n    d2lbert.save_pretrained(net, vocab, PRETRAINED)')
    job = run_d2lbook.recording_errors(
        failing_job(CellExecutionError(traceback, 'ValueError', 'holds files')), str(tmp_path))
    with pytest.raises(CellExecutionError):
        job(notebook_that_printed(''), 'eval/bert-tagging.ipynb', True, 60, 'python')
    report = (tmp_path / 'bert-tagging.txt').read_text()
    assert report == ('ValueError: runs/bert-pretrained holds files\nCell In[3], line 5\n'
                      '    d2lbert.save_pretrained(net, vocab, PRETRAINED)')


def test_a_dead_kernel_leaves_its_traceback_and_the_last_lines_printed(tmp_path):
    printed = ''.join(f'line {i}\n' for i in range(100))
    job = run_d2lbook.recording_errors(failing_job(RuntimeError('Kernel died')),
                                       str(tmp_path))
    with pytest.raises(RuntimeError):
        job(notebook_that_printed(printed), 'eval/bert-squad.ipynb', True, 60, 'python')
    report = (tmp_path / 'bert-squad.txt').read_text()
    assert 'RuntimeError: Kernel died' in report
    assert report.endswith('\n'.join(f'line {i}' for i in range(60, 100)))
    assert 'line 59\n' not in report


def test_a_job_that_succeeds_records_nothing(tmp_path):
    job = run_d2lbook.recording_errors(lambda *args: 'written', str(tmp_path / 'errors'))
    assert job(notebook_that_printed(''), 'eval/bert.ipynb', True, 60, 'python') == 'written'
    assert not (tmp_path / 'errors').exists()


class Task:
    def __init__(self, name):
        self.description = f'Evaluating /book/chapter_bert/{name}.md'


class Scheduler:
    """d2lbook's Scheduler as the build uses it: tasks in, run() runs them in its list's
    order, failures in _failed_tasks."""
    def __init__(self, names, fails=()):
        self._tasks, self._failed_tasks, self.batches = [Task(n) for n in names], [], []
        self.fails = fails

    def run(self):
        names = [run_d2lbook.section_name(task.description) for task in self._tasks]
        self.batches.append(names)
        self._failed_tasks += [(task, RuntimeError('failed'), 'trace') for task in self._tasks
                               if run_d2lbook.section_name(task.description) in self.fails]


ORDER = ['index', 'bert', 'bert-pretraining', 'bert-fine-tuning', 'bert-tagging', 'bert-nli']


def test_the_pretraining_section_runs_alone_first_then_the_toc_order(tmp_path):
    ordered = run_d2lbook.sections_in_order(Scheduler, ORDER, str(tmp_path))
    scheduler = ordered(['bert-nli', 'bert-tagging', 'bert-pretraining', 'bert', 'index'])
    scheduler.run()
    assert scheduler.batches == [['bert-pretraining'],
                                 ['index', 'bert', 'bert-tagging', 'bert-nli']]
    assert scheduler._failed_tasks == [] and not os.listdir(tmp_path)


def test_when_pretraining_fails_the_sections_that_load_its_model_do_not_run(tmp_path):
    ordered = run_d2lbook.sections_in_order(Scheduler, ORDER, str(tmp_path))
    scheduler = ordered(['bert-tagging', 'bert-pretraining'], fails=('bert-pretraining',))
    scheduler.run()
    assert scheduler.batches == [['bert-pretraining']]
    assert len(scheduler._failed_tasks) == 2
    assert 'bert-pretraining' in (tmp_path / 'bert-tagging.txt').read_text()


def test_the_pretraining_notebook_runs_again_when_its_model_is_gone(tmp_path):
    notebook = tmp_path / 'bert-pretraining.ipynb'
    notebook.write_text('{}')
    (tmp_path / 'runs' / 'bert-pretrained').mkdir(parents=True)
    run_d2lbook.rerun_first_without_its_model(str(tmp_path))
    assert notebook.exists()
    (tmp_path / 'runs' / 'bert-pretrained').rmdir()
    run_d2lbook.rerun_first_without_its_model(str(tmp_path))
    assert not notebook.exists()


def test_the_build_prints_the_error_of_the_notebook_that_failed(tmp_path, monkeypatch,
                                                                 capsys):
    """build_book.build with d2lbook replaced by a run that fails one notebook as
    run_d2lbook.py records it; an earlier build's record is not shown again."""
    out = tmp_path / 'book'
    stale = out / build_book.ERRORS / 'bert.txt'
    stale.parent.mkdir(parents=True)
    stale.write_text('an earlier error')
    (out / build_book.MARKER).write_text('')
    error = ''.join(f'traceback line {i}\n' for i in range(100)) + 'ValueError: holds files'

    def d2lbook_failing(command, cwd, env):
        os.makedirs(os.path.join(cwd, build_book.ERRORS), exist_ok=True)
        with open(os.path.join(cwd, build_book.ERRORS, 'bert-tagging.txt'), 'w') as f:
            f.write(error)
        return subprocess.CompletedProcess(command, 1)
    monkeypatch.setattr(build_book, 'ensure_builder', lambda venv: None)
    monkeypatch.setattr(build_book, 'stage_static_files', lambda out, venv: None)
    monkeypatch.setattr(build_book.subprocess, 'run', d2lbook_failing)
    monkeypatch.setattr(build_book, 'unbuilt', lambda out, names: ['bert', 'bert-tagging'])
    with pytest.raises(build_book.BuildError, match='without an up-to-date notebook: '
                       'bert, bert-tagging: their errors are above'):
        build_book.build(str(out), True, str(tmp_path / 'venv'), False)
    printed = capsys.readouterr().err
    assert '--- bert-tagging: its error ---\n(41 lines above cut)\n' in printed
    assert printed.rstrip().endswith('traceback line 99\nValueError: holds files')
    assert 'traceback line 40\n' not in printed
    assert '--- bert: no error recorded' in printed and 'an earlier error' not in printed


def test_the_book_is_released_as_the_package_version(tmp_path):
    import d2lbert
    build_book.write_config(str(tmp_path), ['bert'])
    assert f'release = {d2lbert.__version__}\n' in (tmp_path / 'config.ini').read_text()
