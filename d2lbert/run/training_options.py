"""The options both training commands take (`d2lbert pretrain`, `d2lbert finetune`),
declared once: `PretrainOptions` and `FinetuneOptions` extend `TrainingOptions` with
their own. A field whose default differs between the commands (data, batch size, max
length, warmup, evaluation cadence, checkpoints kept) is declared by each command; a
default that only reads differently is the command's `defaults_shown`.
"""
import dataclasses

from .devices import check_gpu_ids
from .optimizer import OPTIMIZERS
from .options import Options, choice, fraction, integer, number, option, optional, text
from .precision import PRECISIONS

MAX_SEED = 2 ** 32 - 1
DEFAULT_OPTIMIZER = 'bertadam'  # unless a command's recipe chooses another


@dataclasses.dataclass
class TrainingOptions(Options):
    """The settings every training run has, each with its flag's help and its check
    (`run.options`)."""
    model: str = option(None, "the model to start from: a d2lbert pretraining run or model "
                        "folder, a Hugging Face BERT folder, the book's bert.small or bert.base "
                        '(name, zip or folder)', text(optional=True))
    lr: float = option(None, 'peak learning rate', optional(number(0, inclusive=False)))
    optimizer: str = option(None, 'adam, adamw (decoupled weight decay), bertadam (adamw '
                            'without bias correction) or lamb',
                            optional(choice(OPTIMIZERS)), shown_default=DEFAULT_OPTIMIZER)
    weight_decay: float = option(0.01, 'weight decay (never on biases and LayerNorm '
                                 'parameters)', number(0))
    clip: float = option(1.0, 'clip the global gradient norm to this (0: off)',
                         number(0, note=' (0: off)'))
    dropout: float = option(None, 'dropout rate', optional(fraction))
    seed: int = option(0, 'seeds the data, the initialization and dropout (0 to 2^32 - 1)',
                       integer(0, MAX_SEED))
    log_every: int = option(10, 'every N steps, log the training losses averaged since the '
                            'previous log (and check for NaN)', integer(1))
    gpus: str = option(None, 'comma-separated GPU ids, e.g. 0,1 (default: all usable GPUs, '
                       'else the CPU)', check_gpu_ids)
    cpu: bool = option(False, 'train on the CPU even with GPUs')
    precision: str = option('fp32', 'the type the matrix products compute in: fp32, bf16 '
                            '(CPUs with avx512_bf16 or AMX, recent GPUs) or fp16 (GPUs, '
                            'with dynamic loss scaling); weights stay float32',
                            choice(PRECISIONS))
    out: str = option(None, 'output folder', text(optional=True))
    resume: bool = option(False, 'continue from the newest complete checkpoint in --out')
    overwrite: bool = option(False, 'replace --out whole if it holds files (default: refuse)')
    progress: bool = option(True, 'no progress bar')
    plain: bool = option(False, "run the book's model (d2lbert.model) instead of the fast "
                         'path (d2lbert.fast): same numbers, slower on a CPU')

    def __post_init__(self):
        if self.optimizer is None:
            self.optimizer = DEFAULT_OPTIMIZER
        super().__post_init__()
