"""One vector per text, for many texts (issue 53): `encode_texts` and `d2lbert encode
--data` against sentence-transformers and transformers on real SST-2 sentences, the rows
in input order although the texts run sorted by length; `predict` likewise keeps the
file's order; the .npy written as its rows come is numpy's."""
import io
import json
import os

import numpy as onp
import pytest

from conftest import run_main
from test_inputs import minilm_folder, one_line_error, workdir  # noqa: F401 (a fixture)

SST2_DEV = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'shared',
                        'data', 'sst-2', 'dev.tsv')


def sst2_sentences(count):
    """The first `count` sentences of SST-2's dev file (lengths from 3 to 55 words)."""
    path = os.path.normpath(SST2_DEV)
    if not os.path.isfile(path):
        pytest.skip(f'SST-2 not found at {path}')
    with open(path, encoding='utf-8') as f:
        return [line.split('\t')[0].strip() for line in f.read().splitlines()[1:count + 1]]


@pytest.fixture(scope='module')
def minilm():
    from d2lbert.interop import load_pretrained
    return load_pretrained(minilm_folder())


def sentence_transformers_vectors(texts):
    """sentence-transformers' own vectors of texts: all-MiniLM-L6-v2 as its folder says
    (mean pooling), normalized."""
    st = pytest.importorskip('sentence_transformers')
    model = st.SentenceTransformer(minilm_folder(), device='cpu')
    return model.encode(texts, batch_size=16, normalize_embeddings=True)


def assert_equal_vectors(ours, theirs):
    """Row by row the same vectors: each within cosine 0.9999 (issue 53's bound) and
    the same length."""
    cosines = (ours * theirs).sum(axis=1) / (onp.linalg.norm(ours, axis=1)
                                            * onp.linalg.norm(theirs, axis=1))
    assert cosines.min() > 0.9999
    assert onp.abs(onp.linalg.norm(ours, axis=1) - onp.linalg.norm(theirs, axis=1)).max() < 1e-4


def test_encode_texts_equals_sentence_transformers(minilm):
    from d2lbert.interop.sentence_vectors import encode_texts
    texts = sst2_sentences(120)
    net, vocab = minilm
    ours = encode_texts(net, vocab, texts, pooling='mean', batch_size=16, normalize=True)
    theirs = sentence_transformers_vectors(texts)
    assert ours.shape == theirs.shape == (120, 384) and ours.dtype == onp.float32
    assert_equal_vectors(ours, theirs)


def test_bf16_vectors_are_within_the_bound_even_for_one_word_texts():
    """bf16 (`d2lbert encode`'s default where the CPU has it): every row within cosine
    0.9999 of sentence-transformers', one-word texts included, whose vectors bfloat16's
    rounding moves most (all products in bfloat16, "thank" fell to 0.99990 on an AMD
    EPYC Zen 4)."""
    from d2lbert.interop import load_pretrained
    from d2lbert.interop.sentence_vectors import encode_texts
    from d2lbert.run.precision import missing_hardware
    import mxnet as mx
    if missing_hardware('bf16', [mx.cpu()]):
        pytest.skip('this CPU computes no bfloat16')
    texts = ['thank', 'absolutely', 'no . .', 'wow'] + sst2_sentences(60)
    net, vocab = load_pretrained(minilm_folder())
    ours = encode_texts(net, vocab, texts, batch_size=16, normalize=True, precision='bf16')
    assert_equal_vectors(ours, sentence_transformers_vectors(texts))


def test_cls_pooling_is_the_cls_encoding_of_transformers(minilm):
    """--pooling cls: [CLS]'s vector as transformers' BertModel gives it (no pooler)."""
    transformers = pytest.importorskip('transformers')
    torch = pytest.importorskip('torch')
    from d2lbert.interop.sentence_vectors import encode_texts
    texts = sst2_sentences(40)[::-1]
    net, vocab = minilm
    ours = encode_texts(net, vocab, texts, pooling='cls', batch_size=8)
    tokenizer = transformers.BertTokenizer.from_pretrained(minilm_folder())
    model = transformers.BertModel.from_pretrained(minilm_folder(),
                                                   add_pooling_layer=False).eval()
    with torch.no_grad():
        inputs = tokenizer(texts, padding=True, return_tensors='pt')
        theirs = model(**inputs).last_hidden_state[:, 0].numpy()
    assert onp.abs(ours - theirs).max() < 1e-4


def test_encode_data_writes_one_row_per_text_in_order(workdir, capsys):
    """A TSV's column, the pooling read from the folder (mean), texts longer and shorter
    mixed: row i is text i's vector."""
    texts = sst2_sentences(50)
    with open(workdir / 'sents.tsv', 'w', encoding='utf-8') as f:
        f.write('sentence\tlabel\n' + ''.join(f'{text}\t0\n' for text in texts))
    code, out, err = run_main(['encode', '--model', minilm_folder(), '--data', 'sents.tsv',
                               '--text-column', 'sentence', '--normalize', '--out',
                               'emb.npy', '--batch-size', '8'], capsys)
    assert code == 0, err
    assert 'wrote 50 vectors of 384 (mean pooling, normalized) to emb.npy' in out
    assert_equal_vectors(onp.load(workdir / 'emb.npy'), sentence_transformers_vectors(texts))


def test_encode_data_refuses_a_pooling_it_does_not_compute(workdir, capsys):
    """A sentence-transformers folder with max pooling: one line naming its config, and
    --pooling chooses instead."""
    import shutil
    folder = workdir / 'max-pooled'
    shutil.copytree(minilm_folder(), folder)
    config = folder / '1_Pooling' / 'config.json'
    values = json.loads(config.read_text())
    values.update(pooling_mode_mean_tokens=False, pooling_mode_max_tokens=True)
    config.write_text(json.dumps(values))
    (workdir / 'sents.txt').write_text('a fine film\nan awful one\n')
    code, _, err = run_main(['encode', '--model', folder, '--data', 'sents.txt', '--out',
                             'emb.npy'], capsys)
    assert 'asks for max pooling' in one_line_error(code, err)
    assert not (workdir / 'emb.npy').exists()
    code, out, err = run_main(['encode', '--model', folder, '--data', 'sents.txt', '--out',
                               'emb.npy', '--pooling', 'cls'], capsys)
    assert code == 0 and onp.load(workdir / 'emb.npy').shape == (2, 384), err


@pytest.mark.parametrize('args, named', [
    (['a text', '--data', 'sents.txt', '--out', 'e.npy'], 'not both'),
    (['--data', 'sents.txt'], '--data needs --out'),
    (['a text', '--pooling', 'cls'], '--pooling applies to --data'),
    (['--data', 'sents.txt', '--out', 'e.npy', '--save', 'v.npy'], '--save applies to a'),
    (['--data', 'sents.txt', '--out', 'e.npy', '--text-column', 'x'], '--text-column'),
    (['--data', 'sents.txt', '--out', 'sents.txt', '--overwrite'], '--out'),
])
def test_encode_data_flags_that_do_not_fit(args, named, workdir, capsys):
    (workdir / 'sents.txt').write_text('a fine film\n')
    code, _, err = run_main(['encode', '--model', minilm_folder(), *args], capsys)
    assert named in one_line_error(code, err)
    assert (workdir / 'sents.txt').read_text() == 'a fine film\n'


def test_predictions_come_back_in_input_order(minilm):
    """Sorted by length to run, the predictions are those of each example run alone."""
    import mxnet as mx
    from d2lbert.data.tasks import encode_text_pair, EncodedExample
    from d2lbert.finetuning.task_model import TaskInfo, build_task_model
    from d2lbert.finetuning.task_predictions import predict_encoded
    net, vocab = minilm
    info = TaskInfo('custom', 'classifier', ('neg', 'pos', 'mixed'), 128)
    classifier = build_task_model(net, info)
    classifier.output.initialize(mx.init.Normal(1.0))
    encoded = [EncodedExample(*encode_text_pair(text, None, vocab, 128)[:2], None)
               for text in sst2_sentences(30)]
    _, probabilities = predict_encoded(classifier, info, encoded, mx.cpu(), vocab.pad_id,
                                       batch_size=8)
    for example, probs in zip(encoded, probabilities):
        tokens = mx.np.array([example.token_ids], dtype='int32')
        logits = classifier(tokens, mx.np.zeros_like(tokens), None).asnumpy()[0]
        alone = onp.exp(logits) / onp.exp(logits).sum()
        assert onp.abs(probs - alone).max() < 1e-5


def test_npy_rows_are_numpys_npy():
    from d2lbert.run.npy_rows import write_npy_rows
    rows = onp.arange(12, dtype='float32').reshape(4, 3)
    f = io.BytesIO()
    write_npy_rows(f, [rows[:3], rows[3:]], (4, 3))
    assert onp.array_equal(onp.load(io.BytesIO(f.getvalue())), rows)
    with pytest.raises(ValueError, match='3 rows written of the 4'):
        write_npy_rows(io.BytesIO(), [rows[:3]], (4, 3))
