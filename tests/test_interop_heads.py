"""Fine-tuned models <-> Hugging Face: `BERTClassifier`, `BERTTagger` and
`BERTForQuestionAnswering` against `transformers`' BertForSequenceClassification,
BertForTokenClassification and BertForQuestionAnswering, both ways, same logits.

Every model here is small, random and saved to tmp_path: no download.
"""
import json
import os
import warnings

import numpy as onp
import pytest

transformers = pytest.importorskip('transformers')
torch = pytest.importorskip('torch')
safetensors_numpy = pytest.importorskip('safetensors.numpy')

import mxnet as mx  # noqa: E402
from mxnet import np  # noqa: E402
from mxnet.gluon import nn  # noqa: E402

import d2lbert  # noqa: E402
from d2lbert import (BERTClassifier, BERTConfig, BERTForQuestionAnswering,  # noqa: E402
                     BERTModel, BERTTagger)
from d2lbert.data import Vocab  # noqa: E402
from d2lbert.interop import (convert_from_hf, convert_to_hf, from_huggingface,  # noqa: E402
                             to_huggingface)
from d2lbert.interop.hf_weights import parameter_map  # noqa: E402

TOLERANCE = 1e-5
SIZES = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
             intermediate_size=64, max_position_embeddings=40)
TOKENS = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'] + [f'word{i}' for i in range(55)]
LABELS = ('entailment', 'neutral', 'contradiction')
TAGS = ('O', 'B-PER', 'I-PER', 'B-LOC', 'I-LOC')
# (transformers class, its config, the d2lbert class, the labels d2lbert reads back)
CASES = {
    'classifier': ('BertForSequenceClassification',
                   dict(id2label=dict(enumerate(LABELS)),
                        label2id={name: i for i, name in enumerate(LABELS)}),
                   BERTClassifier, LABELS),
    'regression': ('BertForSequenceClassification', dict(num_labels=1), BERTClassifier, None),
    'tagger': ('BertForTokenClassification',
               dict(id2label=dict(enumerate(TAGS)),
                    label2id={name: i for i, name in enumerate(TAGS)}),
               BERTTagger, TAGS),
    'question_answering': ('BertForQuestionAnswering', {}, BERTForQuestionAnswering, None),
}
AUTO_CLASSES = {'BertForSequenceClassification': 'AutoModelForSequenceClassification',
                'BertForTokenClassification': 'AutoModelForTokenClassification',
                'BertForQuestionAnswering': 'AutoModelForQuestionAnswering'}


def random_hf_model(architecture, seed=0, **config):
    """A small transformers task model with every parameter random."""
    torch.manual_seed(seed)
    config = transformers.BertConfig(vocab_size=len(TOKENS), **SIZES, **config)
    model = getattr(transformers, architecture)(config).eval()
    with torch.no_grad():
        for param in model.parameters():
            param.normal_(0, 0.3)
    return model


def save_hf(model, directory):
    model.save_pretrained(directory)
    with open(os.path.join(directory, 'vocab.txt'), 'w', encoding='utf-8') as f:
        f.writelines(token + '\n' for token in TOKENS)
    return directory


def padded_batch(vocab_size=len(TOKENS), seed=0):
    """Three sentence pairs padded to 9 tokens: NumPy tokens, segments (3, 9) and
    valid_lens (3,)."""
    rng = onp.random.RandomState(seed)
    valid_lens = onp.array([9, 6, 4])
    tokens = rng.randint(5, vocab_size, size=(3, 9))
    positions = onp.arange(9)
    segments = (positions >= onp.array([[5], [3], [2]])).astype('int64')
    is_valid = positions < valid_lens[:, None]
    return tokens * is_valid, segments * is_valid, valid_lens


def hf_logits(model, tokens, segments, valid_lens):
    """transformers' logits; question answering's start and end stacked on a last axis."""
    mask = (onp.arange(tokens.shape[1]) < valid_lens[:, None]).astype('int64')
    with torch.no_grad():
        out = model(input_ids=torch.tensor(tokens), token_type_ids=torch.tensor(segments),
                    attention_mask=torch.tensor(mask))
    if hasattr(out, 'start_logits'):
        return onp.stack([out.start_logits.numpy(), out.end_logits.numpy()], axis=-1)
    return out.logits.numpy()


def d2lbert_logits(net, tokens, segments, valid_lens):
    out = net(np.array(tokens), np.array(segments), np.array(valid_lens))
    if isinstance(out, tuple):
        return onp.stack([out[0].asnumpy(), out[1].asnumpy()], axis=-1)
    return out.asnumpy()


def max_difference(ours, theirs, valid_lens):
    """Max |difference| over the examples, and over the valid positions of per-token
    outputs (d2lbert's question answering gives padding a logit of -1e6)."""
    assert ours.shape == theirs.shape
    if ours.ndim == 3:
        valid = onp.arange(ours.shape[1]) < valid_lens[:, None]
        return abs(ours - theirs)[valid].max()
    return abs(ours - theirs).max()


def assert_same_logits(net, model):
    batch = padded_batch()
    difference = max_difference(d2lbert_logits(net, *batch), hf_logits(model, *batch), batch[2])
    print(f'{type(net).__name__}: max |d2lbert - transformers| = {difference:.1e}')
    assert difference < TOLERANCE


@pytest.mark.parametrize('case', CASES)
def test_import_computes_what_transformers_computes(case, tmp_path):
    architecture, config, net_class, labels = CASES[case]
    model = random_hf_model(architecture, **config)
    directory = save_hf(model, str(tmp_path / case))
    with warnings.catch_warnings():
        warnings.simplefilter('error', UserWarning)  # no word on the unused pretraining heads
        net, tokenizer, bert_config = from_huggingface(directory)
    assert type(net) is net_class and net.labels == labels
    assert tokenizer.idx_to_token == TOKENS and bert_config.num_hiddens == 32
    assert_same_logits(net, model)


def d2lbert_task_model(case, seed=0):
    """A d2lbert task model on a Google-architecture BERT, every parameter random."""
    vocab = Vocab({f'word{i}': 100 - i for i in range(55)})  # 60 tokens, as TOKENS
    config = BERTConfig.original(len(vocab), size='book', num_hiddens=32, ffn_num_hiddens=64,
                                 num_heads=4, num_layers=2, max_len=40)
    bert = BERTModel.from_config(config)
    net = {'classifier': lambda: BERTClassifier(bert, len(LABELS)),
           'regression': lambda: BERTClassifier(bert, 1),
           'mean_pooled': lambda: d2lbert.MeanPooledClassifier(bert, len(LABELS)),
           'tagger': lambda: BERTTagger(bert, len(TAGS)),
           'question_answering': lambda: BERTForQuestionAnswering(bert)}[case]()
    net.initialize(mx.init.Normal(0.3))
    rng = onp.random.default_rng(seed)
    for param in net.collect_params().values():  # LayerNorms and biases random too
        param.set_data(np.array(rng.normal(0, 0.3, size=param.shape), dtype='float32'))
    return net, config, vocab


@pytest.mark.parametrize('case', CASES)
def test_export_loads_in_transformers_with_the_same_logits(case, tmp_path):
    architecture, _, _, labels = CASES[case]
    net, config, vocab = d2lbert_task_model(case)
    out = str(tmp_path / 'out')
    to_huggingface(net, config, vocab, out, labels=labels)
    auto_class = getattr(transformers, AUTO_CLASSES[architecture])
    model, info = auto_class.from_pretrained(out, output_loading_info=True)
    assert type(model).__name__ == architecture
    assert not info['missing_keys'] and not info['unexpected_keys']
    assert_same_logits(net, model.eval())
    if labels is not None:
        assert model.config.id2label == dict(enumerate(labels))
        assert model.config.label2id == {name: i for i, name in enumerate(labels)}
    if case == 'regression':
        assert model.config.num_labels == 1 and model.config.problem_type == 'regression'
    back, _, _ = from_huggingface(out)  # and back again
    assert type(back) is type(net) and back.labels == labels
    assert_same_logits(back, model)


def test_labels_default_to_net_labels_and_survive_a_round_trip(tmp_path):
    model = random_hf_model('BertForTokenClassification', **CASES['tagger'][1])
    net, tokenizer, config = from_huggingface(save_hf(model, str(tmp_path / 'hf')))
    to_huggingface(net, config, tokenizer, str(tmp_path / 'again'))  # labels from net
    with open(tmp_path / 'again' / 'config.json') as f:
        assert json.load(f)['id2label'] == {str(i): tag for i, tag in enumerate(TAGS)}
    before = safetensors_numpy.load_file(str(tmp_path / 'hf' / 'model.safetensors'))
    after = safetensors_numpy.load_file(str(tmp_path / 'again' / 'model.safetensors'))
    assert sorted(before) == sorted(after)
    assert all(onp.array_equal(before[name], after[name]) for name in before)
    unnamed, _, _ = d2lbert_task_model('classifier')
    to_huggingface(unnamed, *d2lbert_task_model('classifier')[1:], str(tmp_path / 'unnamed'))
    assert from_huggingface(str(tmp_path / 'unnamed'))[0].labels == (
        'LABEL_0', 'LABEL_1', 'LABEL_2')  # Hugging Face's default names


def test_load_pretrained_takes_the_encoder_of_a_fine_tuned_model(tmp_path):
    model = random_hf_model('BertForSequenceClassification', **CASES['classifier'][1])
    directory = save_hf(model, str(tmp_path / 'hf'))
    with warnings.catch_warnings():
        warnings.simplefilter('error', UserWarning)
        net, vocab = d2lbert.load_pretrained(directory)
    assert type(net) is BERTModel and net.missing_heads == ['mlm', 'nsp']
    tokens, segments, valid_lens = padded_batch()
    encoded = net(np.array(tokens), np.array(segments), np.array(valid_lens))[0].asnumpy()
    mask = torch.tensor((onp.arange(9) < valid_lens[:, None]).astype('int64'))
    with torch.no_grad():
        expected = model.bert(input_ids=torch.tensor(tokens),
                              token_type_ids=torch.tensor(segments),
                              attention_mask=mask).last_hidden_state.numpy()
    valid = onp.arange(9) < valid_lens[:, None]
    assert abs(encoded - expected)[valid].max() < TOLERANCE
    with pytest.raises(ValueError, match='fine-tuned BERTClassifier'):
        convert_from_hf(directory, str(tmp_path / 'converted'))


def test_heads_a_checkpoint_lacks_start_as_in_a_new_model(tmp_path):
    """A fine-tuned classifier has no pretraining heads: theirs start random, Normal(0.02)
    as a new BERT's (their LayerNorm as ones), while every parameter the checkpoint
    holds is its tensor."""
    model = random_hf_model('BertForSequenceClassification', **CASES['classifier'][1])
    net, _ = d2lbert.load_pretrained(save_hf(model, str(tmp_path / 'hf')))
    params = parameter_map(net)
    state = {name: value.numpy() for name, value in model.state_dict().items()}
    for name in ('bert.embeddings.word_embeddings.weight', 'bert.pooler.dense.weight',
                 'bert.encoder.layer.1.output.dense.bias'):
        assert onp.array_equal(params[name].data().asnumpy(), state[name]), name
    weight = params['cls.predictions.transform.dense.weight'].data().asnumpy()  # 32 x 32
    assert 0.017 < weight.std() < 0.023 and abs(weight.mean()) < 0.003
    assert 0.01 < params['cls.seq_relationship.weight'].data().asnumpy().std() < 0.03
    assert (params['cls.predictions.transform.LayerNorm.weight'].data().asnumpy() == 1).all()


@pytest.mark.parametrize('case, labels, message', [
    ('classifier', ('a', 'b'), 'labels has 2 names, but the model has 3 outputs'),
    ('classifier', ('a', 'b', 'a'), 'labels must be distinct strings'),
    ('regression', ('score',), 'a regression model has no labels'),
    ('question_answering', ('start', 'end'), 'a question-answering model has no labels'),
])
def test_export_refuses_labels_that_do_not_fit(case, labels, message, tmp_path):
    net, config, vocab = d2lbert_task_model(case)
    with pytest.raises(ValueError, match=message):
        to_huggingface(net, config, vocab, str(tmp_path / 'out'), labels=labels)
    assert not os.path.exists(tmp_path / 'out')


def test_export_refuses_other_blocks(tmp_path):
    net, config, vocab = d2lbert_task_model('classifier')
    with pytest.raises(TypeError, match='cannot export a Dense'):
        to_huggingface(nn.Dense(3), config, vocab, str(tmp_path / 'out'))
    bert = BERTModel.from_config(config)
    with pytest.raises(ValueError, match='labels are for a fine-tuned'):
        to_huggingface(bert, config, vocab, str(tmp_path / 'out'), labels=LABELS)
    assert not os.path.exists(tmp_path / 'out')


def edit(directory, tensors=None, **changes):
    """Change a saved Hugging Face folder's config.json fields (None deletes one) or its
    tensors (a function of the dict of tensors)."""
    path = os.path.join(directory, 'config.json')
    with open(path) as f:
        values = json.load(f)
    values.update(changes)
    with open(path, 'w') as f:
        json.dump({key: value for key, value in values.items() if value is not None}, f)
    if tensors is not None:
        weights = os.path.join(directory, 'model.safetensors')
        safetensors_numpy.save_file(tensors(safetensors_numpy.load_file(weights)), weights)


def without(name):
    return lambda tensors: {key: value for key, value in tensors.items() if key != name}


@pytest.mark.parametrize('case, changes, message', [
    ('classifier', dict(problem_type='multi_label_classification'), 'multi_label'),
    ('classifier', dict(id2label={'0': 'a', '1': 'b', '3': 'c'}), r'keys of id2label must be'),
    ('classifier', dict(id2label={'0': 'a', '1': 'b'}, label2id=None),
     r"'classifier.weight' has shape \(3, 32\).*\(2, 32\)"),
    ('classifier', dict(tensors=without('classifier.bias')), "lacks the tensor 'classifier.bias'"),
    ('classifier', dict(tensors=without('bert.pooler.dense.weight')),
     "lacks the tensor 'bert.pooler.dense.weight'"),
    ('regression', dict(problem_type='regression', id2label={'0': 'a', '1': 'b'},
                        label2id=None), 'regression with 2 outputs'),
    ('question_answering', dict(id2label={'0': 'a', '1': 'b', '2': 'c'}, label2id=None),
     'question-answering head has 2 outputs'),
])
def test_import_errors_name_the_problem(case, changes, message, tmp_path):
    architecture, config, _, _ = CASES[case]
    directory = save_hf(random_hf_model(architecture, **config), str(tmp_path / case))
    edit(directory, **changes)
    with pytest.raises(ValueError, match=message):
        from_huggingface(directory)


@pytest.mark.parametrize('head,task,labels,auto_class', [
    ('classifier', 'csv', LABELS, 'AutoModelForSequenceClassification'),
    ('question_answering', 'squad2', None, 'AutoModelForQuestionAnswering')])
def test_convert_a_fine_tuned_model_folder(head, task, labels, auto_class, tmp_path):
    from d2lbert.finetuning.task_model import TaskInfo, save_task_model
    net, config, vocab = d2lbert_task_model(head)
    folder = str(tmp_path / 'model')
    save_task_model(folder, net, config, vocab, TaskInfo(task, head, labels, 40))
    convert_to_hf(folder, str(tmp_path / 'hf'))
    model = getattr(transformers, auto_class).from_pretrained(str(tmp_path / 'hf')).eval()
    if labels:
        assert model.config.id2label == dict(enumerate(labels))
    assert_same_logits(net, model)
    loaded, _ = d2lbert.load_pretrained(folder)  # the task model itself
    assert type(loaded) is type(net)


def test_a_mean_pooled_classifier_is_not_exported(tmp_path):
    """Hugging Face's classifiers read <cls>: no architecture computes the mean's logits."""
    net, config, vocab = d2lbert_task_model('mean_pooled')
    with pytest.raises(ValueError, match='--pooling cls'):
        to_huggingface(net, config, vocab, str(tmp_path / 'hf'), LABELS)
    assert not (tmp_path / 'hf').exists()
