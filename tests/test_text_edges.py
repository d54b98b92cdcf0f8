"""Your text, right at the edges (issue 52): an input inside --out survives
--overwrite, --resume notices text that changed, a .json file is JSON lines, a long
table field is read, parameters the objective does not reach stay as they came,
evaluation is bounded, and every command tokenizes words alike.

Every file is generated here; every run is tiny (one or a few steps)."""
import json
import os

import pytest

from conftest import run_main
from test_inputs import minilm_folder, one_line_error, workdir  # noqa: F401 (a fixture)
from test_text_formats import TINY_RUN, random_texts, write


def test_valid_inside_out_survives_overwrite(workdir, capsys):
    """`--valid out/dev.txt --out out --overwrite` emptied out/, dev.txt with it."""
    data = write(workdir / 'lines.txt', '\n'.join(random_texts(200)))
    os.makedirs(workdir / 'out')
    valid = write(workdir / 'out' / 'dev.txt', '\n'.join(random_texts(40, seed=1)))
    with open(valid, 'rb') as f:
        before = f.read()
    code, _, err = run_main(['pretrain', '--data', data, '--line-by-line', '--objective',
                             'mlm', '--valid', valid, '--out', 'out', '--overwrite',
                             *TINY_RUN], capsys)
    assert '--valid' in one_line_error(code, err)
    with open(valid, 'rb') as f:
        assert f.read() == before


def file_bytes(folder):
    """{path: bytes} of every file under folder."""
    found = {}
    for parent, _, names in os.walk(folder):
        for name in names:
            with open(os.path.join(parent, name), 'rb') as f:
                found[os.path.join(parent, name)] = f.read()
    return found


CONTINUED_RUN = ('--objective', 'mlm', '--batch-size', '4', '--max-len', '16', '--steps',
                 '2', '--save-every', '1', '--eval-every', '0', '--no-progress')


def test_resume_refuses_data_that_changed(workdir, capsys):
    """A --model run (a fixed vocabulary), its --data appended to, then --resume: it
    trained on, on another shuffle and another held-out split."""
    from conftest import save_tiny_model
    from d2lbert.data import Vocab
    from test_text_formats import WORDS
    os.makedirs(workdir / 'model')
    model = save_tiny_model(workdir / 'model', Vocab({word: 1 for word in WORDS}))
    data = write(workdir / 'text.txt', '\n'.join(random_texts(300)) + '\n')
    code, _, err = run_main(['pretrain', '--model', model, '--data', data, '--out', 'run',
                             *CONTINUED_RUN], capsys)
    assert code == 0, err
    checkpoints = file_bytes(workdir / 'run' / 'checkpoints')
    with open(data, 'a', encoding='utf-8') as f:
        f.write('\n'.join(random_texts(300, seed=1)) + '\n')
    code, _, err = run_main(['pretrain', '--out', 'run', '--resume'], capsys)
    assert '--data' in one_line_error(code, err) and 'changed' in err
    assert file_bytes(workdir / 'run' / 'checkpoints') == checkpoints
    with open(data, encoding='utf-8') as f:  # the same text again (a new mtime): resumed
        lines = f.readlines()[:300]
    write(data, ''.join(lines))
    code, _, err = run_main(['pretrain', '--out', 'run', '--resume', '--steps', '3'], capsys)
    assert code == 0, err


def test_resume_refuses_a_word_run_tokenized_otherwise(workdir, capsys):
    """A word-vocabulary run records its word tokenization's version; a run.json without
    it (a run older than d2lbert 0.2.0, its options without --layout) or with another
    version is refused on --resume in one line, nothing touched: its text would be cut
    into other tokens than it trained on (0.2.0's runs, with --layout, resume)."""
    data = write(workdir / 'text.txt', '\n'.join(random_texts(300)) + '\n')
    code, _, err = run_main(['pretrain', '--data', data, '--out', 'run', '--preset', 'book',
                             '--vocab', 'words', '--min-freq', '1', *CONTINUED_RUN], capsys)
    assert code == 0, err
    run_file = workdir / 'run' / 'run.json'
    recorded = json.loads(run_file.read_text())
    assert recorded['word_tokenizer'] == 2
    checkpoints = file_bytes(workdir / 'run' / 'checkpoints')
    del recorded['word_tokenizer']
    older = {**recorded, 'options': {name: value for name, value
                                     in recorded['options'].items() if name != 'layout'}}
    for saved in (older, {**recorded, 'word_tokenizer': 1}):
        run_file.write_text(json.dumps(saved))
        code, _, err = run_main(['pretrain', '--out', 'run', '--resume'], capsys)
        assert 'word tokenization version 1 (words split at spaces alone)' in one_line_error(
            code, err), err
        assert file_bytes(workdir / 'run' / 'checkpoints') == checkpoints
        assert json.loads(run_file.read_text()) == saved
    run_file.write_text(json.dumps(recorded))  # 0.2.0's record: --layout, no version
    code, _, err = run_main(['pretrain', '--out', 'run', '--resume', '--steps', '3'], capsys)
    assert code == 0, err
    assert json.loads(run_file.read_text())['word_tokenizer'] == 2


def test_resume_reads_with_the_runs_own_vocabulary(workdir, capsys, monkeypatch):
    """A WordPiece run resumed with its data cache wiped: Hugging Face's trainer would
    learn another vocabulary; the resume takes the one the run folder holds."""
    import shutil
    from d2lbert.data import loader
    data = write(workdir / 'text.txt', '\n'.join(random_texts(300)) + '\n')
    args = ['pretrain', '--data', data, '--out', 'run', '--preset', 'book', '--vocab',
            'wordpiece', '--vocab-size', '100', *CONTINUED_RUN]
    code, _, err = run_main(args, capsys)
    assert code == 0, err
    shutil.rmtree(workdir / 'home')

    def learning(*args, **kwargs):
        raise AssertionError('a resume learned a vocabulary')
    monkeypatch.setattr(loader, 'train_wordpiece', learning)
    code, _, err = run_main(['pretrain', '--out', 'run', '--resume', '--steps', '3'], capsys)
    assert code == 0, err


def texts_of(path, **reading):
    from d2lbert.data.text_sources import read_documents, text_source
    return list(read_documents(text_source(path, **reading), lowercase=False))


def test_a_json_file_is_json_lines_or_an_array_of_records(tmp_path):
    """Hugging Face's run_mlm reads .json as JSON lines; it was read as prose, its
    {"text": ...} syntax and all."""
    records = [{'text': text, 'id': i} for i, text in enumerate(random_texts(60))]
    lines = '\n'.join(json.dumps(record) for record in records) + '\n'
    jsonl = write(tmp_path / 'texts.jsonl', lines)
    as_lines = write(tmp_path / 'lines.json', lines)
    as_array = write(tmp_path / 'array.json', json.dumps(records, indent=1))
    expected = [[record['text']] for record in records]
    assert texts_of(jsonl) == texts_of(as_lines) == texts_of(as_array) == expected


def test_a_broken_json_array_names_the_line(tmp_path):
    from d2lbert.data.tasks.custom import file_records
    path = write(tmp_path / 'broken.json', '[\n{"text": "a"},\n{"text": "b"}\n{"text": "c"}]')
    with pytest.raises(ValueError, match=r'broken.json, line 4: expected "," or "\]"'):
        list(file_records(path))


def test_a_table_field_of_a_whole_article_trains(workdir, capsys):
    """csv refuses fields longer than 131,072 characters unless told otherwise."""
    article = ' '.join(random_texts(40_000))
    assert len(article) > 400_000
    rows = [article] + random_texts(200, seed=1)
    data = write(workdir / 'articles.tsv', 'text\n' + '\n'.join(rows) + '\n')
    code, _, err = run_main(['pretrain', '--data', data, '--objective', 'mlm', '--out', 'out',
                             *TINY_RUN], capsys)
    assert code == 0, err
    with open(workdir / 'out' / 'run.json') as f:
        text = json.load(f)['text']
    assert text['data']['words'] + text['valid']['words'] == sum(len(r.split()) for r in rows)


def test_the_masked_lm_alone_keeps_the_heads_it_does_not_train(workdir, capsys):
    """With --objective mlm no loss reaches the NSP head (pooler and output layer): with
    --optimizer adam (decay added to the gradient) they moved anyway. Now they are
    saved bit-identical to --model's, while the encoder trains."""
    from conftest import save_tiny_model
    from d2lbert.data import Vocab
    from d2lbert.interop import load_pretrained
    from test_text_formats import WORDS
    os.makedirs(workdir / 'model')
    model = save_tiny_model(workdir / 'model', Vocab({word: 1 for word in WORDS}))
    data = write(workdir / 'text.txt', '\n'.join(random_texts(300)) + '\n')
    code, _, err = run_main(['pretrain', '--model', model, '--data', data, '--out', 'run',
                             '--optimizer', 'adam', *CONTINUED_RUN], capsys)
    assert code == 0, err
    before, _ = load_pretrained(model)
    after, _ = load_pretrained(str(workdir / 'run'))
    for name in ('nsp', 'encoder'):
        kept = [(a.data().asnumpy() == b.data().asnumpy()).all() for a, b in zip(
            getattr(before, name).collect_params().values(),
            getattr(after, name).collect_params().values(), strict=True)]
        assert all(kept) == (name == 'nsp'), name


def test_minilm_keeps_its_pooler_under_the_masked_lm(workdir, capsys):
    """Continuing MiniLM with --objective mlm --optimizer adam moved its pooler by 24%
    of its size in 40 steps; fine-tuning's <cls> classifier starts from it. Converted
    back to Hugging Face, it is MiniLM's own."""
    torch = pytest.importorskip('torch')
    transformers = pytest.importorskip('transformers')
    minilm = minilm_folder()
    data = write(workdir / 'text.txt', '\n'.join(random_texts(300)) + '\n')
    code, _, err = run_main(['pretrain', '--model', minilm, '--data', data, '--out', 'run',
                             '--objective', 'mlm', '--optimizer', 'adam', '--steps', '2',
                             '--batch-size', '4', '--max-len', '16', '--eval-every', '0',
                             '--no-progress'], capsys)
    assert code == 0, err
    code, _, err = run_main(['convert', '--to-hf', 'run', '--out', 'hf'], capsys)
    assert code == 0, err
    ours = transformers.BertModel.from_pretrained(str(workdir / 'hf')).pooler.dense
    theirs = transformers.BertModel.from_pretrained(minilm).pooler.dense
    assert torch.equal(ours.weight, theirs.weight) and torch.equal(ours.bias, theirs.bias)


EVALUATED_TWICE = ('--preset', 'book', '--batch-size', '4', '--max-len', '16', '--steps', '2',
                   '--vocab', 'words', '--min-freq', '1', '--eval-every', '1',
                   '--save-every', '0', '--no-progress')


def test_an_evaluation_reads_a_bounded_sample(workdir, capsys, monkeypatch):
    """The held-out part (the last 5% of --data) was evaluated in full at every
    --eval-every: 27 MB of a 540 MB file each time. Now --valid-batches of it (default
    VALID_BATCHES), the same sample every time; 0: all of it."""
    from d2lbert.pretraining import evaluate
    from d2lbert.pretraining.pretrain import VALID_BATCHES
    data = write(workdir / 'lines.txt', '\n'.join(random_texts(2000)) + '\n')
    batches = []

    def counting(net, batch, *args, **kwargs):
        batches.append(batch)
        return losses(net, batch, *args, **kwargs)
    losses = evaluate.shard_losses
    monkeypatch.setattr(evaluate, 'shard_losses', counting)
    counts = {}
    for limit in (None, '0'):
        batches.clear()
        code, _, err = run_main(['pretrain', '--data', data, '--line-by-line', '--objective',
                                 'mlm', '--out', f'out-{limit}', *EVALUATED_TWICE,
                                 *(['--valid-batches', limit] if limit else [])], capsys)
        assert code == 0, err
        counts[limit] = len(batches) // 2  # two evaluations, of the same sample
        assert [b.tokens.tolist() for b in batches[:counts[limit]]] == [
            b.tokens.tolist() for b in batches[counts[limit]:]]
    assert counts[None] == VALID_BATCHES < counts['0']  # 100 held-out texts, packed


@pytest.mark.parametrize('documents, objective', [(2, 'mlm'), (8, 'mlm'), (25, 'mlm+nsp')])
def test_a_small_file_holds_out_little_or_names_valid(documents, objective, workdir, capsys):
    """Of 2 documents the last (half the text) was held out; mlm+nsp under 30
    documents was refused without a word of --valid."""
    paragraphs = [' '.join(f'{text} .' for text in random_texts(30, seed=seed))
                  for seed in range(documents)]
    data = write(workdir / 'text.txt', '\n'.join(paragraphs) + '\n')
    code, _, err = run_main(['pretrain', '--data', data, '--objective', objective, '--out',
                             'out', *TINY_RUN], capsys)
    assert '--valid' in one_line_error(code, err)
    assert not os.path.exists(workdir / 'out')


ORDINARY_TEXT = ('Paris is big. The river, long and slow, runs to the sea! '
                 "Don't the cat and dog sit on a mat?")


def reference_words(text):
    """An independent word split: lower-cased runs of letters, digits and
    underscores, and every other visible character alone."""
    words, word = [], ''
    for char in text.lower() + ' ':
        if char.isalnum() or char == '_':
            word += char
            continue
        words += [word] if word else []
        word = ''
        words += [] if char.isspace() else [char]
    return words


def test_pretraining_and_fine_tuning_split_words_alike():
    """A word vocabulary was read with sentence.split() in pretraining, with
    word_tokenize in fine-tuning: continuing the book's model on ordinary text made
    'paris.' one <unk>."""
    from d2lbert.data import Vocab
    from d2lbert.data.subwords import sentence_encoder
    from d2lbert.data.tasks import encode_text_pair
    words = reference_words(ORDINARY_TEXT)
    vocab = Vocab({word: 1 for word in words})
    pretraining = sentence_encoder(vocab)(ORDINARY_TEXT)
    fine_tuning = encode_text_pair(ORDINARY_TEXT, None, vocab, 100)[0][1:-1]
    assert pretraining == fine_tuning == vocab[words]
    assert vocab.unk_id not in pretraining


def test_a_models_vocabulary_on_new_text_says_what_it_leaves_unknown(workdir, capsys):
    from conftest import save_tiny_model
    from d2lbert.data import Vocab
    known = reference_words(ORDINARY_TEXT)
    os.makedirs(workdir / 'model')
    model = save_tiny_model(workdir / 'model', Vocab({word: 1 for word in known}))
    lines = [f'{text} {ORDINARY_TEXT} zebra quokka' for text in random_texts(200)]
    data = write(workdir / 'text.txt', '\n'.join(lines) + '\n')
    code, out, err = run_main(['pretrain', '--model', model, '--data', data, '--out', 'run',
                               *CONTINUED_RUN], capsys)
    assert code == 0, err
    training = [word for line in lines[:190] for word in reference_words(line)]  # 5% held out
    share = sum(word not in known for word in training) / len(training)
    assert f'--model {model}: its vocabulary leaves {share:.1%} of the tokens of --data' in out
    rows = [{'text': line, 'label': str(i % 2)} for i, line in enumerate(lines[:40])]
    table = write(workdir / 'train.jsonl', '\n'.join(map(json.dumps, rows)) + '\n')
    code, out, err = run_main(['finetune', '--task', 'csv', '--model', model, '--data', table,
                               '--out', 'tuned', '--epochs', '1', '--max-len', '64',
                               '--no-progress'], capsys)
    assert code == 0, err
    words = [word for row in rows for word in reference_words(row['text'])]
    share = sum(word not in known for word in words) / len(words)
    assert f'--model {model}: its vocabulary leaves {share:.1%} of the tokens of --data' in out


def sentence_per_line_with_a_stray_blank_line(path, lines=400):
    """A file of a sentence per line (paragraphs of the 'paragraphs' layout), one blank
    line a third of the way in."""
    texts = [text + '.' for text in random_texts(lines)]
    return write(path, '\n'.join(texts[:lines // 3] + [''] + texts[lines // 3:]) + '\n')


def test_a_stray_blank_line_does_not_make_two_documents(tmp_path):
    """One blank line in a file of a sentence per line made Google's layout: two giant
    documents, the last held out (a third or two thirds of the text)."""
    from d2lbert.data.text_sources import count_texts, text_source
    source = text_source(sentence_per_line_with_a_stray_blank_line(tmp_path / 'a.txt'))
    assert source.file_format == 'paragraphs' and count_texts(source).documents == 400
    assert ('guessed from 1 blank-line breaks in 400 lines of text (--layout states it)'
            in source.describe())
    google = '\n\n'.join('\n'.join(random_texts(5, seed=i)) for i in range(3))
    assert text_source(write(tmp_path / 'b.txt', google)).file_format == 'sentences'


def test_layout_states_how_a_file_is_read(workdir, capsys):
    """--layout sentences reads the stray blank line as Google's break (two documents:
    the held-out one too large, refused naming --valid); --layout paragraphs, the
    guess, trains and says so in one line."""
    data = sentence_per_line_with_a_stray_blank_line(workdir / 'text.txt')
    args = ['pretrain', '--data', data, '--objective', 'mlm', *TINY_RUN]
    code, _, err = run_main([*args, '--layout', 'sentences', '--out', 'a'], capsys)
    assert "Google BERT's layout" in one_line_error(code, err) and '--valid' in err
    code, out, err = run_main([*args, '--layout', 'paragraphs', '--out', 'b'], capsys)
    assert code == 0, err
    assert f'--data {data}: a paragraph per line (sentences ending at . ! or ?): 400 ' in out
    code, _, err = run_main([*args, '--layout', 'lines', '--line-by-line', '--out', 'c'],
                            capsys)
    assert code == 0, err
    code, _, err = run_main([*args, '--layout', 'sentences', '--line-by-line', '--out', 'd'],
                            capsys)
    assert '--layout' in one_line_error(code, err)


def test_a_warm_start_reads_the_data_file_once(workdir, capsys, monkeypatch):
    """A second start on the same --data file (the cache warm, a new process: nothing
    remembered in memory) read it 4 times: for its blank lines, its counts, the counts
    of its held-out part and its SHA-1. Now only to hash it."""
    import builtins
    from d2lbert.util import hashing
    data = sentence_per_line_with_a_stray_blank_line(workdir / 'text.txt')
    args = ['pretrain', '--data', data, '--objective', 'mlm', *TINY_RUN]
    code, cold, err = run_main([*args, '--out', 'cold'], capsys)
    assert code == 0, err
    opened, real_open = [], builtins.open
    with monkeypatch.context() as patch:
        patch.setattr(builtins, 'open', lambda file, *a, **k: (
            opened.append(file) if os.path.abspath(str(file)) == data else None,
            real_open(file, *a, **k))[1])
        patch.setattr(hashing, 'REMEMBERED_SHA1S', {})
        code, warm, err = run_main([*args, '--out', 'warm'], capsys)
    assert code == 0, err
    assert len(opened) <= 1
    assert [line for line in warm.splitlines() if line.startswith('--data')] == [
        line for line in cold.splitlines() if line.startswith('--data')]
