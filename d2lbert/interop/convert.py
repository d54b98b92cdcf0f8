"""`d2lbert convert`: a d2lbert model directory <-> a Hugging Face BERT directory.

A d2lbert model directory holds

    config.json             `BERTConfig.to_json_file`
    vocab.json | vocab.txt  a d2lbert `Vocab` (`Vocab.save`), or a WordPiece vocabulary
                            (with tokenizer_config.json saying whether it lower-cases)
    model.params            `net.save_parameters`
    manifest.json           every file's size and SHA-1 (`run.checkpoint`), which
                            `load_pretrained` checks (a folder written before it
                            existed loads without)
"""
import dataclasses
import json
import os

from ..finetuning.task_model import is_task_model, load_task_model
from ..model import BERTModel
from ..run.checkpoint import load_parameters, read_config_and_vocab
from ..run.errors import as_library_errors
from ..run.folder import folder_written_whole, write_model_folder
from ..run.models import model_folder, model_step
from ..run.options import Options, option, text
from .hf_tasks import check_has_hf_form
from .huggingface import from_huggingface, to_huggingface


@dataclasses.dataclass
class ConvertOptions(Options):
    """The options of `d2lbert convert`, each declared once (`run.options`)."""
    from_hf: str = option(None, 'a Hugging Face BERT folder', text(optional=True),
                          metavar='DIR')
    to_hf: str = option(None, 'a d2lbert model folder, checkpoint or run folder (a '
                        'fine-tuning run: its best model, the one predict uses)',
                        text(optional=True), metavar='DIR')
    out: str = option(None, 'the folder to write (new or empty)', text(), required=True)
    overwrite: bool = option(False, 'replace --out whole if it holds files (default: refuse)')
    allow_pickle: bool = option(False, 'read pytorch_model.bin (unpickling can run code: '
                                'only for files you trust)')

    def check_together(self):
        if (self.from_hf is None) == (self.to_hf is None):
            raise ValueError('give one of --from-hf DIR (to d2lbert) and --to-hf DIR (to '
                             'Hugging Face)')
        if self.to_hf is not None and self.allow_pickle:
            raise ValueError('--allow-pickle does not apply to --to-hf (it reads a d2lbert '
                             'model, never a pickle), only to --from-hf')


def convert_from_hf(hf_dir, out_dir, allow_pickle=False, overwrite=False):
    """Hugging Face BERT directory -> d2lbert model directory, written as `d2lbert
    convert --from-hf` writes it (`write_hf_model`). Returns the missing heads.

    Only a pretrained BERT: a fine-tuned one (`hf_tasks`) is refused, as its task head
    would be lost; `from_huggingface` loads it, and `d2lbert finetune --model` takes its
    encoder as it is. A ValueError naming out_dir for an output that can't be written
    (see `run.folder.write_model_folder`: `save_pretrained` writes alike).
    """
    model = read_hf_model(hf_dir, allow_pickle)
    with as_library_errors():
        return write_hf_model('out_dir', out_dir, model, overwrite, {'hf_dir': hf_dir})


def read_hf_model(hf_dir, allow_pickle=False):
    """(net, tokenizer, config) of a Hugging Face directory of a pretrained BERT, read
    and checked whole before anything is written (see `convert_from_hf`)."""
    net, tokenizer, config = from_huggingface(hf_dir, allow_pickle)
    if not isinstance(net, BERTModel):
        raise ValueError(f'{hf_dir} holds a fine-tuned {type(net).__name__} (config.json\'s '
                         'architectures); convert --from-hf converts pretrained BERTs only')
    return net, tokenizer, config


def write_hf_model(flag, out_dir, model, overwrite=False, inputs=None):
    """Write the model (net, tokenizer, config) `read_hf_model` read as the d2lbert model
    folder `out_dir` (`run.folder.write_model_folder`, as `save_pretrained` writes one;
    flag: what errors name); returns the heads the net lacks."""
    net, tokenizer, config = model
    write_model_folder(flag, out_dir, net, config, tokenizer, overwrite, inputs)
    return net.missing_heads


def load_model_dir(model_dir):
    """(net, vocab, config) of a d2lbert model directory."""
    config, vocab = read_config_and_vocab(model_dir)
    net = load_parameters(BERTModel.from_config(config), model_dir)
    return net, vocab, config


def convert_to_hf(path, out_dir, overwrite=False):
    """The model `path` means (`run.models.model_folder`: a run's best model, a
    checkpoint, a model folder; a fine-tuned one, see `convert_task_model_to_hf`) ->
    Hugging Face BERT directory, written as `d2lbert convert --to-hf` writes it
    (`write_hf_folder`; a ValueError naming out_dir for an output it refuses). Returns
    (the model folder, its step or None)."""
    model, folder = read_model_to_export(path)
    with as_library_errors():
        write_hf_folder('out_dir', out_dir, model, overwrite, {'path': path})
    return folder, model_step(folder)


def write_hf_folder(flag, out_dir, model, overwrite=False, inputs=None):
    """Write the model (net, config, vocab, labels) that `read_model_to_export` read as
    the Hugging Face folder `out_dir` (`to_huggingface`), as `run.folder.
    folder_written_whole` writes a folder (flag: what errors name); returns its
    architecture, as its config.json names it ('BertForPreTraining', ...)."""
    net, config, vocab, labels = model
    with folder_written_whole(flag, out_dir, overwrite, inputs or {}) as tmp:
        to_huggingface(net, config, vocab, tmp, labels)
        with open(os.path.join(tmp, 'config.json'), encoding='utf-8') as f:
            architecture = json.load(f)['architectures'][0]
    return architecture


def read_model_to_export(path):
    """((net, config, vocab, labels), folder) of the model `path` means (see
    `convert_to_hf`), read and checked whole before anything is written; labels: a
    fine-tuned model's class or tag names (None for a pretrained one)."""
    folder = model_folder(path)
    if not os.path.isfile(os.path.join(folder, 'model.params')):
        raise ValueError(f'{path} holds no d2lbert model (model.params), no run folder '
                         '(checkpoints/ or model/)')
    if is_task_model(folder):
        net, config, vocab, info = load_task_model(folder)
        check_has_hf_form(net)  # before anything is written
        return (net, config, vocab, info.labels), folder
    net, vocab, config = load_model_dir(folder)
    return (net, config, vocab, None), folder


def convert_task_model_to_hf(model_dir, out_dir, overwrite=False):
    """A fine-tuned model folder (`d2lbert finetune`'s OUT/model, or one of its
    checkpoints) -> a Hugging Face `BertForSequenceClassification`,
    `BertForTokenClassification` or `BertForQuestionAnswering` directory, the task's
    labels as its id2label; written as `convert_to_hf` writes it."""
    net, config, vocab, info = load_task_model(model_dir)
    with as_library_errors():
        write_hf_folder('out_dir', out_dir, (net, config, vocab, info.labels), overwrite,
                        {'model_dir': model_dir})
