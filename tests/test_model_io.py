"""Text in and models in and out, as a library user calls them: `encode_batch` against
Hugging Face's tokenizer, and `save_pretrained` -> `load_pretrained` as a pair."""
import csv
import json
import os

import mxnet as mx
import numpy as onp
import pytest
from mxnet import np

import d2lbert
from conftest import REPO_ROOT, make_model
from d2lbert.data.tasks.encoding import encode_text_pair
from test_inputs import minilm_folder

SHARED = os.path.join(os.path.dirname(REPO_ROOT), 'shared', 'data')
if not os.path.isdir(SHARED):  # a checkout one folder deeper than the shared data's
    SHARED = '/work/shared/data'


def shared_file(*parts):
    path = os.path.join(SHARED, *parts)
    if not os.path.exists(path):
        pytest.skip(f'{path} is absent')
    return path


def sst2_sentences(count=200):
    with open(shared_file('sst-2', 'dev.tsv'), encoding='utf-8') as f:
        rows = list(csv.DictReader(f, delimiter='\t', quoting=csv.QUOTE_NONE))
    return [row['sentence'] for row in rows[:count]]


def real_pairs():
    """Sentence pairs of STS-B's and SNLI's real rows."""
    pairs = []
    with open(shared_file('finetune-samples', 'stsb_dev_sample.tsv'), encoding='utf-8') as f:
        for row in csv.DictReader(f, delimiter='\t', quoting=csv.QUOTE_NONE):
            pairs.append((row['sentence1'], row['sentence2']))
    with open(shared_file('finetune-samples', 'snli_sample.jsonl'), encoding='utf-8') as f:
        for line in f:
            row = json.loads(line)
            pairs.append((row['sentence1'], row['sentence2']))
    return pairs


@pytest.fixture(scope='module')
def minilm():
    net, vocab = d2lbert.load_pretrained(minilm_folder())
    return net, vocab


@pytest.fixture(scope='module')
def hf_tokenizer():
    transformers = pytest.importorskip('transformers')
    return transformers.AutoTokenizer.from_pretrained(minilm_folder())


def assert_equals_hf(ours, theirs):
    tokens, segments, valid_lens = (array.asnumpy() for array in ours)
    onp.testing.assert_array_equal(tokens, onp.array(theirs['input_ids']))
    onp.testing.assert_array_equal(segments, onp.array(theirs['token_type_ids']))
    onp.testing.assert_array_equal(valid_lens, onp.array(theirs['attention_mask']).sum(1))


@pytest.mark.parametrize('max_len', [128, 16])
def test_encode_batch_equals_hugging_faces_tokenizer_on_sst2(minilm, hf_tokenizer, max_len):
    texts = sst2_sentences()
    ours = d2lbert.encode_batch(minilm[1], texts, max_len=max_len)
    theirs = hf_tokenizer(texts, padding=True, truncation=True, max_length=max_len)
    assert_equals_hf(ours, theirs)


def test_encode_batch_equals_hugging_faces_tokenizer_on_real_pairs(minilm, hf_tokenizer):
    first, second = zip(*real_pairs())
    ours = d2lbert.encode_batch(minilm[1], list(first), list(second))
    theirs = hf_tokenizer(list(first), list(second), padding=True, truncation=True,
                          max_length=128)
    assert_equals_hf(ours, theirs)


def sst2_pairs():
    """SST-2 sentences paired with each other: each with the next one, and the longest
    with the shortest (very unequal lengths)."""
    sentences = sst2_sentences()
    by_length = sorted(sentences, key=len)
    return (list(zip(sentences[::2], sentences[1::2]))
            + list(zip(by_length[:20], by_length[::-1][:20]))
            + list(zip(by_length[::-1][:20], by_length[:20])))


# Hard pairs: very unequal lengths, equal lengths (a tie), a budget that cannot be shared
# evenly (odd overflow), texts of one token, of none, and of words split into pieces.
HARD_PAIRS = [
    ('a ' * 40, 'b'), ('b', 'a ' * 40), ('a ' * 12, 'b ' * 12), ('a ' * 13, 'b ' * 13),
    ('a ' * 7, 'b ' * 8), ('a ' * 8, 'b ' * 7), ('a ' * 30, 'b ' * 31), ('x', 'y'),
    ('', 'b ' * 20), ('a ' * 20, ''), ('unaffable ' * 9, 'antidisestablishmentarianism ' * 5),
    ('The Peel River flows into the sea.', 'A river flows.'), ('a ' * 5, 'b ' * 6)]


@pytest.mark.parametrize('max_len', [16, 32, 64])
def test_encode_batch_equals_hugging_faces_tokenizer_on_cut_pairs(minilm, hf_tokenizer,
                                                                   max_len):
    """Real pairs (STS-B, SNLI, SST-2's sentences paired) and hard ones, cut to max_len as
    transformers' fast tokenizer cuts them, by default for a Hugging Face vocabulary."""
    first, second = zip(*(real_pairs() + sst2_pairs() + HARD_PAIRS))
    ours = d2lbert.encode_batch(minilm[1], list(first), list(second), max_len=max_len)
    theirs = hf_tokenizer(list(first), list(second), padding=True, truncation=True,
                          max_length=max_len)
    assert_equals_hf(ours, theirs)
    assert_equals_hf(d2lbert.encode_batch(minilm[1], list(first), list(second),
                                          max_len=max_len, truncation='transformers'),
                     theirs)


@pytest.mark.parametrize('max_len', [10, 16])
def test_encode_batch_cuts_pairs_as_fine_tuning_on_request(minilm, max_len):
    """truncation='google' (the book's and fine-tuning's rule, `encode_text_pair`) on a
    WordPiece vocabulary; on hard pairs it differs from the default somewhere."""
    vocab = minilm[1]
    first, second = zip(*HARD_PAIRS)
    tokens, segments, valid_lens = d2lbert.encode_batch(vocab, first, second, max_len,
                                                        truncation='google')
    for row, (text, pair) in enumerate(HARD_PAIRS):
        ids, segment_ids, valid_len = encode_text_pair(text, pair, vocab, max_len)
        assert valid_lens[row].item() == valid_len
        assert tokens[row, :valid_len].asnumpy().tolist() == ids
        assert segments[row, :valid_len].asnumpy().tolist() == segment_ids
    default, _, _ = d2lbert.encode_batch(vocab, first, second, max_len)
    assert (default != tokens).any()


def test_encode_batch_pads_what_fine_tuning_encodes_for_a_word_vocabulary():
    """The book's word-level Vocab: each row is fine-tuning's encoding of the text
    (`encode_text_pair`), padded with pad_id to the longest."""
    vocab = d2lbert.Vocab({'a': 3, 'man': 2, 'hat': 2, ',': 1, 'red': 1})
    texts, pairs = ['A man, red.', 'hat'], ['a hat', 'Red man hat, a man']
    tokens, segments, valid_lens = d2lbert.encode_batch(vocab, texts, pairs, max_len=8)
    assert tokens.shape == segments.shape == (2, max(valid_lens.asnumpy()))
    for row, (text, pair) in enumerate(zip(texts, pairs)):
        ids, segment_ids, valid_len = encode_text_pair(text, pair, vocab, 8)
        assert valid_lens[row].item() == valid_len
        assert tokens[row].asnumpy().tolist() == ids + [vocab.pad_id] * (
            tokens.shape[1] - valid_len)
        assert segments[row, :valid_len].asnumpy().tolist() == segment_ids


@pytest.mark.parametrize('texts, pairs, message', [
    ([], None, 'texts is empty'), (['a', 'b'], ['c'], '2 texts but 1 text_pairs'),
    (['a'], ['b'], "truncation must be one of .* got 'longest'")])
def test_encode_batch_refuses_bad_input(texts, pairs, message):
    vocab = d2lbert.Vocab({'a': 1})
    truncation = 'longest' if 'truncation' in message else 'auto'
    with pytest.raises(ValueError, match=message):
        d2lbert.encode_batch(vocab, texts, pairs, truncation=truncation)


def encodings(net, vocab, texts):
    tokens, segments, valid_lens = d2lbert.encode_batch(vocab, texts)
    outputs = net(tokens, segments, valid_lens)
    outputs = outputs if isinstance(outputs, (tuple, list)) else [outputs]
    return [output.asnumpy() for output in outputs if output is not None]


TEXTS = ['the man wore a red hat .', 'a hat']


def test_a_saved_model_loads_back_with_identical_outputs(tmp_path):
    net = make_model('original')
    vocab = d2lbert.Vocab({f'w{i}': 1 for i in range(59)})  # 64 ids, as the tiny model
    folder = d2lbert.save_pretrained(net, vocab, str(tmp_path / 'model'))
    loaded, loaded_vocab = d2lbert.load_pretrained(folder)
    assert loaded_vocab.idx_to_token == vocab.idx_to_token
    assert loaded.config == net.config
    for ours, theirs in zip(encodings(net, vocab, TEXTS), encodings(loaded, vocab, TEXTS)):
        onp.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize('bad', [float('nan'), float('inf')])
def test_a_saved_model_with_a_nan_or_infinity_is_refused_by_name(tmp_path, bad):
    """A model saved from a run that diverged loads as an error naming the parameter that
    holds the NaN or infinity (one value of 9,984), not as a model."""
    from d2lbert.run.checkpoint import CheckpointError
    net = make_model('original')
    weight = net.encoder.blocks[1].ffn.dense1.weight
    values = weight.data().asnumpy()
    values[3, 7] = bad
    weight.set_data(np.array(values))
    vocab = d2lbert.Vocab({f'w{i}': 1 for i in range(59)})
    folder = d2lbert.save_pretrained(net, vocab, str(tmp_path / 'model'))
    name = weight.name.split('_', 1)[1]  # without the model's prefix, which loading renews
    with pytest.raises(CheckpointError, match=rf'parameter \w*_{name} holds NaN or infinite'):
        d2lbert.load_pretrained(folder)


@pytest.mark.parametrize('head', ['classifier', 'mean', 'tagger', 'question_answering'])
def test_a_saved_task_model_loads_back_with_identical_outputs(tmp_path, head):
    from d2lbert.finetuning.task_model import read_task_info
    bert = make_model('d2l')
    vocab = d2lbert.Vocab({f'w{i}': 1 for i in range(59)})
    net = {'classifier': lambda: d2lbert.BERTClassifier(bert, 3),
           'mean': lambda: d2lbert.MeanPooledClassifier(bert, 3),
           'tagger': lambda: d2lbert.BERTTagger(bert, 4),
           'question_answering': lambda: d2lbert.BERTForQuestionAnswering(bert)}[head]()
    net.output.initialize(mx.init.Normal(0.5))
    labels = ['neg', 'neutral', 'pos'] if head in ('classifier', 'mean') else None
    folder = d2lbert.save_pretrained(net, vocab, str(tmp_path / 'model'), labels=labels)
    loaded, _ = d2lbert.load_pretrained(folder)
    assert type(loaded) is type(net)
    if labels:
        assert read_task_info(folder).labels == tuple(labels)
    for ours, theirs in zip(encodings(net, vocab, TEXTS), encodings(loaded, vocab, TEXTS)):
        onp.testing.assert_array_equal(ours, theirs)


def test_save_pretrained_keeps_what_is_there(tmp_path):
    """A folder with files, or a path through a link, is refused; nothing is touched."""
    net, vocab = make_model('d2l'), d2lbert.Vocab({f'w{i}': 1 for i in range(59)})
    taken = tmp_path / 'taken'
    taken.mkdir()
    (taken / 'notes.txt').write_text('mine')
    with pytest.raises(ValueError, match='holds files'):
        d2lbert.save_pretrained(net, vocab, str(taken))
    assert [p.name for p in taken.iterdir()] == ['notes.txt']
    empty = tmp_path / 'empty'
    empty.mkdir()
    (tmp_path / 'link').symlink_to(empty)
    with pytest.raises(Exception, match='symbolic link'):
        d2lbert.save_pretrained(net, vocab, str(tmp_path / 'link'), overwrite=True)
    assert list(empty.iterdir()) == [] and (tmp_path / 'link').is_symlink()


def test_a_saved_minilm_converts_to_hugging_face(tmp_path, minilm):
    """MiniLM loaded, saved, loaded again and converted (`d2lbert convert --to-hf`):
    transformers' BertModel reads the conversion and computes d2lbert's encodings."""
    torch = pytest.importorskip('torch')
    transformers = pytest.importorskip('transformers')
    from d2lbert.interop.convert import convert_to_hf
    net, vocab = minilm
    folder = d2lbert.save_pretrained(net, vocab, str(tmp_path / 'minilm'))
    again, again_vocab = d2lbert.load_pretrained(folder)
    texts = sst2_sentences(16) if os.path.isdir(SHARED) else TEXTS
    ours = encodings(again, again_vocab, texts)[0]
    onp.testing.assert_array_equal(ours, encodings(net, vocab, texts)[0])
    convert_to_hf(folder, str(tmp_path / 'hf'))
    model = transformers.BertModel.from_pretrained(str(tmp_path / 'hf')).eval()
    tokens, segments, valid_lens = d2lbert.encode_batch(vocab, texts)
    mask = onp.arange(tokens.shape[1]) < valid_lens.asnumpy()[:, None]
    with torch.no_grad():
        theirs = model(input_ids=torch.tensor(tokens.asnumpy()).long(),
                       token_type_ids=torch.tensor(segments.asnumpy()).long(),
                       attention_mask=torch.tensor(mask).long()).last_hidden_state.numpy()
    assert onp.abs(ours - theirs)[mask].max() < 1e-4


def test_pooled_output_is_what_the_classifier_reads():
    net = make_model('d2l')
    classifier = d2lbert.BERTClassifier(net, 2, dropout=0.0)
    classifier.output.initialize()
    tokens = np.array([[2, 7, 9, 3]], dtype='int32')
    segments, valid_lens = np.zeros_like(tokens), np.array([4], dtype='int32')
    encoded, _, _ = net(tokens, segments, valid_lens)
    expected = classifier.output(net.pooled_output(encoded))
    onp.testing.assert_allclose(classifier(tokens, segments, valid_lens).asnumpy(),
                                expected.asnumpy(), rtol=1e-6)


def test_the_d2l_books_constructor_call_works():
    """`BERTModel(vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout,
    max_len=...)`, as the d2l book calls it, `num_blks` by name too."""
    positional = d2lbert.BERTModel(100, 32, 64, 2, 3, 0.2, max_len=16)
    named = d2lbert.BERTModel(vocab_size=100, num_hiddens=32, ffn_num_hiddens=64,
                              num_heads=2, num_blks=3, dropout=0.2, max_len=16)
    assert positional.config == named.config
    assert len(named.encoder.blocks) == named.config.num_layers == 3
