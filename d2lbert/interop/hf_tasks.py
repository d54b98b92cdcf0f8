"""Fine-tuned BERTs in Hugging Face's format: the task heads.

    d2lbert                    config.json `architectures`      head tensors
    BERTClassifier             BertForSequenceClassification    bert.pooler.dense.*, classifier.*
    BERTTagger                 BertForTokenClassification       classifier.*
    BERTForQuestionAnswering   BertForQuestionAnswering         qa_outputs.*
    MeanPooledClassifier       none (Hugging Face's classifiers read <cls>)

The encoder's tensors are those of `hf_weights.encoder_map`; a task checkpoint has no
masked-LM or next-sentence head (nor, but for the classifier, a pooler). config.json
also says how many outputs the head has and what they mean:

    id2label       {"0": name, "1": name, ...}: a class or tag per output, in id order
                   (label2id is its reverse); Hugging Face's default names are LABEL_0, ...
    problem_type   "regression" for a classifier with one output (STS-B), else
                   "single_label_classification" (one class per text: softmax)

A question-answering head always has two outputs: the start and the end logits.
"""
import numpy as onp
from mxnet import init, np

from ..model import (BERTClassifier, BERTForQuestionAnswering, BERTTagger,
                     MeanPooledClassifier)
from .hf_weights import check_shapes, dense

ARCHITECTURES = {BERTClassifier: 'BertForSequenceClassification',
                 BERTTagger: 'BertForTokenClassification',
                 BERTForQuestionAnswering: 'BertForQuestionAnswering'}
# The pretraining heads (`hf_weights.HEADS`) each task's checkpoint does without.
UNUSED_HEADS = {'BertForSequenceClassification': ('mlm', 'nsp'),
                'BertForTokenClassification': ('pooler', 'mlm', 'nsp'),
                'BertForQuestionAnswering': ('pooler', 'mlm', 'nsp')}
HEAD_NAMES = ('classifier', 'qa_outputs')  # the output layers' names


def check_has_hf_form(net):
    """ValueError for a task model that Hugging Face has no architecture for: a
    `MeanPooledClassifier` (Hugging Face's classifiers read `<cls>`)."""
    if isinstance(net, MeanPooledClassifier):
        raise ValueError('a classifier that reads the mean of its tokens (finetune '
                         "--pooling mean); Hugging Face's classifiers read <cls>, so it "
                         'has no Hugging Face form (fine-tune with --pooling cls)')


def architecture_of(net):
    """The Hugging Face architecture of a task model, None for anything else."""
    for task_class, architecture in ARCHITECTURES.items():
        if isinstance(net, task_class):
            return architecture
    return None


def task_architecture(hf_config):
    """The task architecture a config.json (a dict) names, or None for a pretrained BERT
    (`BertForPreTraining`, `BertModel`, `BertForMaskedLM`, or no `architectures`)."""
    tasks = [name for name in hf_config.get('architectures') or () if name in UNUSED_HEADS]
    return tasks[0] if tasks else None


def head_map(net):
    """Hugging Face tensor name -> Parameter of a task model's head (a classifier's
    pooler included)."""
    if isinstance(net, BERTClassifier):
        return {**dense('bert.pooler.dense', net.pooler), **dense('classifier', net.output)}
    if isinstance(net, BERTTagger):
        return dense('classifier', net.output)
    return dense('qa_outputs', net.output)


def is_head_tensor(name):
    """Whether a (canonical) tensor name belongs to a task model's output layer."""
    return name.split('.')[0] in HEAD_NAMES


def num_outputs(net):
    """Classes (1: regression), tags, or 2 (start, end) of a task model."""
    if isinstance(net, BERTClassifier):
        return net.num_classes
    if isinstance(net, BERTTagger):
        return net.num_tags
    return 2


def is_regression(net):
    return isinstance(net, BERTClassifier) and net.num_classes == 1


def head_config(net, labels=None):
    """The config.json fields of a task model's head (a dict): architectures, id2label,
    label2id and, for a classifier, problem_type.

    labels: the names of the classes or tags in id order; None gives Hugging Face's
      default names LABEL_0, LABEL_1, ... A regression model or a question-answering
      model takes none.
    """
    outputs = num_outputs(net)
    if labels is not None:
        labels = check_labels(net, labels, outputs)
    names = labels or tuple(f'LABEL_{i}' for i in range(outputs))
    fields = {'architectures': [architecture_of(net)],
              'id2label': {str(i): name for i, name in enumerate(names)},
              'label2id': {name: i for i, name in enumerate(names)}}
    if isinstance(net, BERTClassifier):
        fields['problem_type'] = ('regression' if is_regression(net)
                                  else 'single_label_classification')
    return fields


def check_labels(net, labels, outputs):
    """`labels` as a tuple, after checking it names each output once."""
    if is_regression(net) or isinstance(net, BERTForQuestionAnswering):
        kind = 'a regression model' if is_regression(net) else 'a question-answering model'
        raise ValueError(f'{kind} has no labels: pass labels=None')
    labels = tuple(labels)
    if len(labels) != outputs:
        raise ValueError(f'labels has {len(labels)} names, but the model has {outputs} '
                         'outputs')
    if not all(isinstance(name, str) for name in labels) or len(set(labels)) != len(labels):
        raise ValueError(f'labels must be distinct strings, got {labels}')
    return labels


def read_labels(architecture, hf_config, source):
    """(labels, number of outputs) of a task config.json (a dict): labels is the tuple
    of id2label's names in id order, None for regression and question answering."""
    id2label = hf_config.get('id2label')
    if id2label:
        keys = {str(key): key for key in id2label}  # strings in JSON
        if set(keys) != {str(i) for i in range(len(id2label))}:
            raise ValueError(f'{source}: the keys of id2label must be 0 .. '
                             f'{len(id2label) - 1}, got {sorted(keys)}')
        names = tuple(id2label[keys[str(i)]] for i in range(len(id2label)))
    else:
        names = tuple(f'LABEL_{i}' for i in range(hf_config.get('num_labels', 2)))
    problem_type = hf_config.get('problem_type')
    if architecture == 'BertForQuestionAnswering':
        if len(names) != 2:
            raise ValueError(f'{source}: a question-answering head has 2 outputs (start, '
                             f'end), but id2label names {len(names)}')
        return None, 2
    if problem_type == 'multi_label_classification':
        raise ValueError(f'{source}: problem_type is multi_label_classification (a sigmoid '
                         "per class); d2lbert's classifier picks one class (softmax)")
    if architecture == 'BertForSequenceClassification' and (
            problem_type == 'regression' or len(names) == 1):
        if len(names) != 1:
            raise ValueError(f'{source}: a regression with {len(names)} outputs; '
                             "d2lbert's regression predicts one number")
        return None, 1
    return names, len(names)


def task_model(architecture, bert, hf_config, tensors, source):
    """The task model config.json describes, on `bert` (a `BERTModel` holding the
    checkpoint's encoder and pooler), its output layer copied from `tensors` (canonical
    names -> NumPy arrays). Sets `net.labels` (see `read_labels`)."""
    labels, outputs = read_labels(architecture, hf_config, source)
    dropout = hf_config.get('classifier_dropout')
    if dropout is None:
        dropout = hf_config.get('hidden_dropout_prob', 0.1)
    if architecture == 'BertForSequenceClassification':
        net = BERTClassifier(bert, outputs, dropout)
    elif architecture == 'BertForTokenClassification':
        net = BERTTagger(bert, outputs, dropout)
    else:
        net = BERTForQuestionAnswering(bert)
    net.output.initialize(init.Normal(0.02))
    params = head_map(net)
    for name in params:
        if name not in tensors:
            raise ValueError(f'{source} lacks the tensor {name!r} of its '
                             f'{architecture} head')
    check_shapes(params, tensors, source)
    for name, param in params.items():
        param.set_data(np.array(onp.asarray(tensors[name], dtype='float32')))
    net.labels = labels
    return net
