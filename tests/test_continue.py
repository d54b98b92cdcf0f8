"""`pretrain --model M`: a run continues a d2lbert run, a Hugging Face BERT (with or
without its masked-LM head) or a book model, taking its architecture and vocabulary,
evaluating where M starts, and resuming and converting as any run.

Every model here is tiny, random and saved to tmp_path; a few steps each."""
import hashlib
import json
import os
import shutil
import warnings

import numpy as onp
import pytest

transformers = pytest.importorskip('transformers')
torch = pytest.importorskip('torch')

from d2lbert.cli import main  # noqa: E402
from d2lbert.data import load_data_wiki  # noqa: E402
from d2lbert.data.vocab_files import read_wordpiece  # noqa: E402
from test_cli_flags import run_main  # noqa: E402

SIZES = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
             intermediate_size=64, max_position_embeddings=40)
WORDS = [f'word{i}' for i in range(60)]
TOKENS = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', '.'] + WORDS
STEPS = ['--objective', 'mlm', '--steps', '2', '--eval-every', '1', '--batch-size', '16',
         '--max-len', '32', '--log-every', '1', '--no-progress']


@pytest.fixture(scope='module')
def text_file(tmp_path_factory):
    """Paragraphs of three sentences of words the tiny vocabulary knows."""
    rng = onp.random.default_rng(0)
    path = tmp_path_factory.mktemp('text') / 'text.txt'
    with open(path, 'w', encoding='utf-8') as f:
        for _ in range(120):
            sentences = [' '.join(rng.choice(WORDS, rng.integers(3, 7))) + ' .'
                         for _ in range(3)]
            f.write(' '.join(sentences) + '\n')
    return str(path)


def save_hf(model_class, directory, seed=0):
    """A tiny random Hugging Face BERT of model_class saved with its vocab.txt."""
    torch.manual_seed(seed)
    model = model_class(transformers.BertConfig(vocab_size=len(TOKENS), **SIZES)).eval()
    model.save_pretrained(directory)
    with open(os.path.join(directory, 'vocab.txt'), 'w', encoding='utf-8') as f:
        f.writelines(token + '\n' for token in TOKENS)
    return str(directory)


@pytest.fixture(scope='module')
def hf_masked_lm(tmp_path_factory):
    return save_hf(transformers.BertForMaskedLM, tmp_path_factory.mktemp('mlm'))


@pytest.fixture(scope='module')
def hf_bare(tmp_path_factory):
    return save_hf(transformers.BertModel, tmp_path_factory.mktemp('bare'))


def read_records(out, split):
    with open(os.path.join(out, 'metrics.jsonl'), encoding='utf-8') as f:
        return [r for r in map(json.loads, f) if r['split'] == split]


def folder_sha1(folder):
    """The checksum run.json records, recomputed: SHA-1 of the repr of the sorted (file
    name, file SHA-1) pairs of the folder's files."""
    pairs = tuple((name, hashlib.sha1(open(os.path.join(folder, name), 'rb').read())
                   .hexdigest()) for name in sorted(os.listdir(folder))
                  if os.path.isfile(os.path.join(folder, name)))
    return hashlib.sha1(repr(pairs).encode('utf-8')).hexdigest()


def continue_model(model, text_file, out, capsys, *more):
    code, err = run_main(['pretrain', '--model', model, '--data', text_file, '--out', str(out),
                          *STEPS, *more], capsys)
    assert code == 0, err
    return str(out)


def transformers_mlm_loss(model_dir, text_file):
    """The held-out masked-LM loss of transformers' BertForMaskedLM on the batches the
    run evaluates (same file, vocabulary, seed, sizes): the step-0 reference."""
    model = transformers.BertForMaskedLM.from_pretrained(model_dir).eval()
    valid, _ = load_data_wiki(16, 32, text_file, 'valid', vocab=read_wordpiece(model_dir),
                              seed=0, shuffle=False, full_sentences=True)  # --objective mlm
    total = slots = 0.0
    for batch in valid.batches(0):
        tokens, segments, valid_lens, positions, weights, labels = (
            torch.tensor(onp.asarray(batch[i])) for i in range(6))
        mask = (torch.arange(tokens.shape[1])[None] < valid_lens[:, None]).long()
        with torch.no_grad():
            logits = model(input_ids=tokens.long(), token_type_ids=segments.long(),
                           attention_mask=mask).logits
        picked = logits[torch.arange(len(tokens))[:, None], positions.long()]
        losses = torch.nn.functional.cross_entropy(picked.transpose(1, 2), labels.long(),
                                                   reduction='none')
        total += float((losses * weights).sum())
        slots += float(weights.sum())
    return total / slots


def test_a_hugging_face_masked_lm_is_evaluated_where_it_starts(hf_masked_lm, text_file,
                                                                tmp_path, capsys):
    """Step 0's held-out MLM loss is transformers' own on the same batches; the run
    takes M's sizes and vocabulary, and records M's path and checksum."""
    out = continue_model(hf_masked_lm, text_file, tmp_path / 'run', capsys, '--valid',
                         text_file)
    first = read_records(out, 'valid')[0]
    assert first['step'] == 0
    assert first['mlm_loss'] == pytest.approx(transformers_mlm_loss(hf_masked_lm,
                                                                    text_file), abs=1e-4)
    assert [r['step'] for r in read_records(out, 'valid')] == [0, 1, 2]
    with open(os.path.join(out, 'config.json')) as f:
        config = json.load(f)
    assert (config['num_hiddens'], config['num_layers'], config['num_heads'],
            config['ffn_num_hiddens'], config['vocab_size'], config['max_len']) == (
                32, 2, 4, 64, len(TOKENS), 40)
    assert (config['hidden_act'], config['tie_decoder']) == ('gelu', True)
    with open(os.path.join(out, 'vocab.txt')) as f:
        assert f.read().split() == TOKENS
    with open(os.path.join(out, 'run.json')) as f:
        recorded = json.load(f)['model']
    assert recorded['path'] == os.path.abspath(hf_masked_lm)
    assert recorded['sha1'] == folder_sha1(hf_masked_lm)


def test_a_bare_bert_model_gets_a_fresh_tied_head_that_converts(hf_bare, text_file,
                                                                 tmp_path, capsys):
    """MiniLM's case: no MLM transform, no NSP head. They are drawn fresh, the output
    layer is the word embedding (tied); convert --to-hf writes the MLM head, which
    transformers' BertForMaskedLM loads and computes the same logits with."""
    out = str(tmp_path / 'run')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        code = main(['pretrain', '--model', hf_bare, '--data', text_file, '--out', out, *STEPS])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert (f"--model {hf_bare} has no masked-LM or next-sentence head: drawn fresh (the "
            "masked LM's output tied to the word embeddings)") in printed.out  # in the
    # command's words, not as a Python warning
    assert not [w for w in caught if 'head' in str(w.message)]
    assert read_records(out, 'valid')[0]['step'] == 0
    hf_out = str(tmp_path / 'hf')
    code, err = run_main(['convert', '--to-hf', out, '--out', hf_out], capsys)
    assert code == 0, err
    model = transformers.BertForMaskedLM.from_pretrained(hf_out).eval()
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight
    trained = model.cls.predictions.transform.dense.weight
    fresh = transformers.BertForMaskedLM.from_pretrained(hf_bare).cls.predictions.transform
    assert not torch.allclose(trained, fresh.dense.weight)  # drawn by d2lbert, then trained
    from d2lbert.interop import load_pretrained
    from mxnet import np
    net, vocab = load_pretrained(out)
    tokens = onp.array([[2, 6, 4, 9, 10, 3, 0, 0], [2, 11, 12, 13, 4, 14, 5, 3]])
    valid_lens = onp.array([6, 8])
    positions = onp.array([[1, 2, 3], [4, 5, 6]])
    _, ours, _ = net(np.array(tokens, dtype='int32'), np.zeros(tokens.shape, dtype='int32'),
                     np.array(valid_lens, dtype='float32'), np.array(positions, dtype='int32'))
    mask = torch.tensor((onp.arange(8)[None] < valid_lens[:, None]).astype('int64'))
    with torch.no_grad():
        theirs = model(input_ids=torch.tensor(tokens), attention_mask=mask).logits
    theirs = theirs[torch.arange(2)[:, None], torch.tensor(positions)].numpy()
    onp.testing.assert_allclose(ours.asnumpy(), theirs, atol=1e-4, rtol=0)


def test_a_d2lbert_run_is_continued_and_resumed(text_file, tmp_path, capsys):
    """A from-scratch run continued: its (words) vocabulary and size carry over, its
    checkpoint's checksum is recorded; the continued run, cut back to its step-2
    checkpoint (as a kill leaves it) and resumed, trains step 3 as it did."""
    first = tmp_path / 'first'
    code, err = run_main(['pretrain', '--data', text_file, '--out', str(first), '--preset',
                          'book', '--vocab', 'words', '--min-freq', '1', '--steps', '1',
                          '--batch-size', '16', '--no-progress'], capsys)
    assert code == 0, err
    out = continue_model(str(first), text_file, tmp_path / 'run', capsys, '--steps', '3',
                         '--save-every', '1')
    with open(os.path.join(out, 'vocab.json')) as f, \
            open(os.path.join(first, 'vocab.json')) as g:
        assert json.load(f) == json.load(g)
    with open(os.path.join(out, 'run.json')) as f:
        recorded = json.load(f)['model']
    checkpoint = os.path.join(first, 'checkpoints', 'step-000001')
    assert recorded['sha1'] == folder_sha1(checkpoint)
    whole = read_records(out, 'train')
    shutil.rmtree(os.path.join(out, 'checkpoints', 'step-000003'))
    code, err = run_main(['pretrain', '--out', out, '--resume'], capsys)
    assert code == 0, err
    resumed = read_records(out, 'train')
    assert [r['mlm_loss'] for r in resumed] == pytest.approx([r['mlm_loss'] for r in whole],
                                                             rel=1e-6)
    assert [r['step'] for r in read_records(out, 'valid')] == [0, 1, 2, 3]


def test_a_book_model_is_continued(text_file, tmp_path, capsys):
    """The book's format (vocab.json, pretrained.params; here a tiny random d2l 1.0.3
    BERTModel): the run keeps its d2l architecture and the book's vocabulary."""
    from test_book_models import BOOK_TOKENS, d2l_bert, save_book_folder, zip_folder
    folder = save_book_folder(d2l_bert(num_hiddens=64, ffn_num_hiddens=64, num_heads=1,
                                       num_blks=1), str(tmp_path / 'bert.small'))
    book = zip_folder(folder, str(tmp_path / 'bert.small.zip'))
    out = continue_model(book, text_file, tmp_path / 'run', capsys)
    with open(os.path.join(out, 'config.json')) as f:
        config = json.load(f)
    assert (config['num_hiddens'], config['num_layers'], config['hidden_act']) == (
        64, 1, 'relu')
    with open(os.path.join(out, 'vocab.json')) as f:
        assert sorted(json.load(f)['idx_to_token']) == sorted(BOOK_TOKENS)
    with open(os.path.join(out, 'run.json')) as f:
        recorded = json.load(f)['model']
    assert recorded['sha1'] == hashlib.sha1(open(book, 'rb').read()).hexdigest()
    assert read_records(out, 'valid')[0]['step'] == 0


@pytest.mark.parametrize('flag', [['--preset', 'small'], ['--config', 'c.json'],
                                  ['--vocab', 'words']])
def test_size_and_vocabulary_flags_are_refused_with_model(flag, hf_masked_lm, text_file,
                                                          tmp_path, capsys):
    out = tmp_path / 'run'
    code, err = run_main(['pretrain', '--model', hf_masked_lm, '--data', text_file, '--out',
                          str(out), *flag], capsys)
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert flag[0] in err and '--model' in err
    assert not out.exists()


def test_a_time_budget_in_bf16_continues_a_model(hf_masked_lm, text_file, tmp_path, capsys):
    """--minutes and --precision bf16 (where the CPU has it) work as for a new run: the
    step-0 evaluation comes before the budget's clock, a last one ends it."""
    import mxnet as mx
    from d2lbert.run.errors import RunError
    from d2lbert.run.precision import check_hardware
    try:
        check_hardware('bf16', [mx.cpu()])
        precision = 'bf16'
    except RunError:  # no avx512_bf16 or AMX here
        precision = 'fp32'
    out = str(tmp_path / 'run')
    code, err = run_main(['pretrain', '--model', hf_masked_lm, '--data', text_file, '--out',
                          out, '--objective', 'mlm', '--minutes', '0.1', '--batch-size', '16',
                          '--max-len', '32', '--precision', precision, '--no-progress'], capsys)
    assert code == 0, err
    steps = [r['step'] for r in read_records(out, 'valid')]
    assert steps[0] == 0 and steps[-1] > 0


def test_a_fresh_masked_lm_head_learns_faster(hf_bare, hf_masked_lm):
    """The transform and output bias of a head M lacked get FRESH_HEAD_LR_MULT times
    the learning rate (the tied output weight, the encoder and a head M had: 1)."""
    import mxnet as mx
    from d2lbert.interop import load_pretrained
    from d2lbert.interop.pretrained import model_source
    from d2lbert.pretraining.start import (FRESH_HEAD_LR_MULT, StartModel, continued_config,
                                           continued_net)
    for model, head_mult in ((hf_bare, FRESH_HEAD_LR_MULT), (hf_masked_lm, 1.0)):
        start = StartModel(*load_pretrained(model), model_source(model))
        net = continued_net(start, continued_config(start, None, 32), [mx.cpu()])
        mults = {param: param.lr_mult for param in net.collect_params().values()}
        head = [*net.mlm.transform.collect_params().values(), net.mlm.output_bias]
        assert {mults.pop(param) for param in head} == {head_mult}
        assert set(mults.values()) == {1.0}
        assert net.mlm.output_weight is net.encoder.token_embedding.weight


def test_a_model_saved_from_python_is_continued_and_fine_tuned(text_file, tmp_path, capsys):
    """`d2lbert.save_pretrained` writes a folder that `pretrain --model` continues
    (its config and vocabulary carry over) and that `finetune --model` starts from."""
    import d2lbert
    from mxnet import init
    vocab = d2lbert.Vocab({token: 1 for token in ['.', *WORDS]})
    net = d2lbert.BERTModel(len(vocab), 32, 64, 2, 1, 0.1, max_len=40)
    net.initialize(init.Normal(0.02))
    saved = d2lbert.save_pretrained(net, vocab, str(tmp_path / 'saved'))
    out = continue_model(saved, text_file, tmp_path / 'run', capsys)
    with open(os.path.join(out, 'config.json')) as f:
        assert d2lbert.BERTConfig.from_dict(json.load(f)) == net.config
    with open(os.path.join(out, 'run.json')) as f:
        assert json.load(f)['model']['sha1'] == folder_sha1(saved)
    table = tmp_path / 'labels.tsv'
    table.write_text('text\tlabel\n' + ''.join(
        f'word{i} word{i + 1} .\t{i % 2}\n' for i in range(40)), encoding='utf-8')
    code, err = run_main(['finetune', '--task', 'csv', '--data', str(table), '--dev',
                          str(table), '--model', saved, '--out', str(tmp_path / 'tuned'),
                          '--epochs', '1', '--batch-size', '8', '--max-len', '16',
                          '--no-progress'], capsys)
    assert code == 0, err
