"""`pretrain --data` reads text as users have it (one text per line, Google BERT's
layout, a table's column, JSON lines), packs it for the masked LM alone (RoBERTa's
FULL-SENTENCES), and refuses malformed text in one line, leaving --out empty.

Every file is generated here; counts are checked against a count of what was written."""
import csv
import json
import os
import subprocess
import sys

import numpy as onp
import pytest

from d2lbert.data import Vocab, build_pretraining_examples
from d2lbert.data.full_sentences import fill_sequences, full_sentence_sequences, text_pieces
from d2lbert.data.text_sources import (count_texts, read_documents, split_held_out,
                                       text_source)

WORDS = ('the cat dog sat ran on a mat park film good bad long short story actor plot '
         'music slow fast').split()
# tiny settings: a run of one step on a model of 2 layers, 128 hidden units
TINY_RUN = ('--preset', 'book', '--batch-size', '4', '--max-len', '16', '--steps', '1',
            '--vocab', 'words', '--min-freq', '1', '--eval-every', '0', '--save-every', '0',
            '--no-progress')


def random_texts(count, seed=0, max_words=12):
    """count texts of 1 to max_words random words (no sentence-ending punctuation)."""
    rng = onp.random.default_rng(seed)
    return [' '.join(rng.choice(WORDS, rng.integers(1, max_words + 1)))
            for _ in range(count)]


def write(path, text, encoding='utf-8'):
    with open(path, 'w', encoding=encoding, newline='') as f:
        f.write(text)
    return str(path)


def read(source):
    return list(read_documents(source, lowercase=False))


def test_one_text_per_line(tmp_path):
    texts = random_texts(50)
    path = write(tmp_path / 'lines.txt', '\n'.join(t + ('. And more!' if i % 3 else '')
                                                 for i, t in enumerate(texts)) + '\n\n\n')
    with open(path) as f:
        lines = [line.strip() for line in f if line.strip()]
    source = text_source(path, line_by_line=True)
    assert read(source) == [[line] for line in lines]  # a line is one text, sentences and all
    counts = count_texts(source)
    assert (counts.documents, counts.texts) == (len(lines), len(lines))
    assert counts.words == sum(len(line.split()) for line in lines)


def test_google_bert_layout(tmp_path):
    documents = [random_texts(n, seed=n) for n in (3, 1, 4, 2)]
    path = write(tmp_path / 'google.txt',
                 '\n\n'.join('\n'.join(document) for document in documents) + '\n')
    source = text_source(path)
    assert source.file_format == 'sentences'
    assert read(source) == documents  # every line one sentence, blocks are documents
    counts = count_texts(source)
    assert (counts.documents, counts.texts, counts.paired_documents) == (4, 10, 3)


@pytest.mark.parametrize('extension', ['tsv', 'csv', 'jsonl'])
def test_a_table_column(tmp_path, extension):
    texts = random_texts(30) + ['with, a comma', 'a "quoted" word', ' spaces around ']
    path = str(tmp_path / f'table.{extension}')
    with open(path, 'w', encoding='utf-8', newline='') as f:
        if extension == 'jsonl':
            for i, text in enumerate(texts):
                f.write(json.dumps({'label': i % 2, 'sentence': text}) + '\n')
        elif extension == 'tsv':  # GLUE's: no quoting
            f.write('sentence\tlabel\n' + ''.join(f'{t}\t{i % 2}\n' for i, t in enumerate(texts)))
        else:
            writer = csv.writer(f)
            writer.writerow(['sentence', 'label'])
            writer.writerows([text, i % 2] for i, text in enumerate(texts))
    source = text_source(path, text_column='sentence')
    assert read(source) == [[text.strip()] for text in texts]
    assert count_texts(source).words == sum(len(t.split()) for t in texts)
    with pytest.raises(ValueError, match=f"{path}, line .*no column 'text'.*--text-column"):
        read(text_source(path))


def test_bom_and_crlf_read_as_clean_text(tmp_path):
    texts = random_texts(20)
    clean = write(tmp_path / 'clean.txt', '\n'.join(texts) + '\n')
    windows = write(tmp_path / 'windows.txt', '\ufeff' + '\r\n'.join(texts) + '\r\n')
    assert read(text_source(windows, line_by_line=True)) == read(text_source(clean, True))
    table = write(tmp_path / 'windows.tsv', '\ufeffsentence\r\n' + '\r\n'.join(texts))
    assert read(text_source(table, text_column='sentence')) == [[t] for t in texts]


def test_held_out_split_is_the_last_documents(tmp_path):
    texts = random_texts(100)
    source = text_source(write(tmp_path / 'a.txt', '\n'.join(texts)), line_by_line=True)
    train, held_out = split_held_out(source, count_texts(source))
    assert read(train) == [[t] for t in texts[:95]]
    assert read(held_out) == [[t] for t in texts[95:]]


def piece_stream(tokens, pieces):
    """The pieces' tokens, each followed by -1 (a <sep>)."""
    return [t for start, length in zip(*pieces) for t in [*tokens[start:start + length], -1]]


@pytest.mark.parametrize('max_len', [5, 8, 16])
def test_full_sentences_packing(max_len):
    """Every sequence fits max_len, starts with <cls>, holds whole texts in order each
    ended by <sep> (a text longer than max_len - 3 cut in pieces), is full (the next
    piece would not fit), and together they hold every token once."""
    rng = onp.random.default_rng(max_len)
    text_lengths = rng.integers(0, 3 * max_len, 200)
    offsets = onp.concatenate([[0], onp.cumsum(text_lengths)])
    tokens = rng.integers(10, 1000, offsets[-1]).astype(onp.int32)
    vocab = type('Specials', (), {'cls_id': 2, 'sep_id': 3})
    starts, lengths = text_pieces(offsets, max_len - 3)
    assert lengths.max() <= max_len - 3 and lengths.min() >= 1
    texts_again = onp.concatenate([tokens[s:s + n] for s, n in zip(starts, lengths)])
    assert (texts_again == tokens).all()  # the pieces are the texts, in order, whole
    bounds = fill_sequences(lengths, max_len)
    flat, sequence_lengths = full_sentence_sequences(tokens, starts, lengths, bounds, vocab)
    assert sequence_lengths.max() <= max_len and sequence_lengths.sum() == len(flat)
    sequences = onp.split(flat, onp.cumsum(sequence_lengths)[:-1])
    assert all(s[0] == 2 and s[-1] == 3 for s in sequences)
    stream = [t if t != 3 else -1 for s in sequences for t in s[1:]]
    assert stream == piece_stream(tokens, (starts, lengths))
    for b, n in zip(bounds[1:-1], sequence_lengths):
        assert n + lengths[b] + 1 > max_len  # the next piece did not fit: the sequence is full


def fill_sequences_one_at_a_time(piece_lengths, max_len):
    """`fill_sequences` as it was before issue 52: one binary search per sequence, in a
    Python loop (the reference the vectorised one must equal)."""
    cost_through = onp.cumsum(onp.asarray(piece_lengths, dtype=onp.int64) + 1)
    bounds = [0]
    while bounds[-1] < len(piece_lengths):
        spent = cost_through[bounds[-1] - 1] if bounds[-1] else 0
        bounds.append(int(onp.searchsorted(cost_through, spent + max_len - 1, side='right')))
    return onp.array(bounds, dtype=onp.int64)


@pytest.mark.parametrize('max_len', [5, 8, 16, 128])
def test_packing_is_vectorised_and_equals_the_loop(max_len, monkeypatch):
    """The sequences' bounds equal the old loop's on random lengths (the longest piece,
    max_len - 2, and single pieces included), found with one binary search for all
    pieces, not one per sequence."""
    rng = onp.random.default_rng(max_len)
    for num_pieces in (0, 1, 2, 1000):
        lengths = rng.integers(1, max_len - 1, num_pieces)
        expected = fill_sequences_one_at_a_time(lengths, max_len)
        searches = []
        real_search = onp.searchsorted
        monkeypatch.setattr(onp, 'searchsorted',
                            lambda *a, **k: searches.append(1) or real_search(*a, **k))
        bounds = fill_sequences(lengths, max_len)
        monkeypatch.undo()
        assert bounds.dtype == onp.int64 and bounds.tolist() == expected.tolist()
        assert len(searches) <= 1


def test_full_sentence_examples_hold_every_text(tmp_path, monkeypatch):
    """Through the pipeline (cached examples): the <cls>-less, <sep>-split tokens of the
    sequences are the file's texts, in order."""
    monkeypatch.setenv('D2LBERT_HOME', str(tmp_path / 'home'))
    texts = random_texts(300, max_words=40)
    path = write(tmp_path / 'texts.txt', '\n'.join(texts))
    source = text_source(path, line_by_line=True)
    examples = build_pretraining_examples(source, max_len=32, vocab=Vocab(
        {w: 1 for w in WORDS}, min_freq=1), dynamic_masking=True, full_sentences=True)
    vocab = examples.vocab
    token_ids, _ = examples.tokens(onp.arange(len(examples)))
    tokens = [vocab.idx_to_token[t] for t in token_ids]
    assert max(examples.lengths) <= 32  # and segment ids all 0:
    assert (examples.first_segment_lengths == examples.lengths).all()
    read_back = ' '.join(t for t in tokens if t != '<cls>').replace(' <sep>', '\n').split('\n')
    words = [w for text in texts for w in text.split()]
    assert [w for line in read_back for w in line.split()] == words


def run_pretrain(tmp_path, *args):
    """`python -m d2lbert pretrain ARGS --out OUT`: (exit code, stderr lines but
    warnings, the files in OUT)."""
    out = tmp_path / 'out'
    env = dict(os.environ, D2LBERT_HOME=str(tmp_path / 'home'), OMP_NUM_THREADS='1')
    done = subprocess.run([sys.executable, '-m', 'd2lbert', 'pretrain', *args, '--out',
                           str(out)], capture_output=True, text=True, env=env, timeout=300)
    lines = [line for line in done.stderr.splitlines()
             if line.strip() and 'Warning' not in line and not line.startswith('  ')]
    return done.returncode, lines, sorted(os.listdir(out)) if out.exists() else []


def test_mlm_nsp_on_one_text_per_line_is_refused(tmp_path):
    path = write(tmp_path / 'a.txt', '\n'.join(random_texts(50)))
    code, lines, files = run_pretrain(tmp_path, '--data', path, '--line-by-line', *TINY_RUN)
    assert code == 2 and len(lines) == 1 and '--objective mlm' in lines[0], lines
    assert files == []


MALFORMED = {
    'empty': b'',
    'blank lines only': b'\n \n\t\n\r\n',
    'not UTF-8': 'caf\u00e9 au lait\n'.encode('latin-1') * 50,
    'binary': bytes(range(256)) * 40,
    'NUL bytes': (b'\0' * 100 + b'\n') * 50,
    'a single line': b'one text and nothing else\n',
}


@pytest.mark.parametrize('case', sorted(MALFORMED))
def test_malformed_text_is_one_line_and_leaves_nothing(tmp_path, case):
    path = str(tmp_path / 'text.txt')
    with open(path, 'wb') as f:
        f.write(MALFORMED[case])
    code, lines, files = run_pretrain(tmp_path, '--data', path, '--objective', 'mlm',
                                      '--line-by-line', *TINY_RUN)
    assert code == 2 and len(lines) == 1 and path in lines[0], lines
    assert files == []


def test_a_missing_column_is_one_line(tmp_path):
    path = write(tmp_path / 'sst.tsv', 'sentence\tlabel\n' + '\n'.join(
        f'{t}\t1' for t in random_texts(40)))
    code, lines, files = run_pretrain(tmp_path, '--data', path, '--objective', 'mlm',
                                      *TINY_RUN)
    assert code == 2 and len(lines) == 1 and "no column 'text'" in lines[0], lines
    assert files == []


def test_too_little_text_for_a_batch_is_one_line(tmp_path):
    """SST-2's 872 dev sentences used to end in a ZeroDivisionError traceback, with
    run.json, config.json and a vocabulary left in --out."""
    path = write(tmp_path / 'few.txt', '\n'.join(random_texts(20, max_words=3)))
    code, lines, files = run_pretrain(tmp_path, '--data', path, '--line-by-line',
                                      '--objective', 'mlm', *TINY_RUN[:2], '--batch-size',
                                      '64', *TINY_RUN[4:])
    assert code == 2 and len(lines) == 1 and 'no batch of --batch-size 64' in lines[0], lines
    assert files == []


def test_bom_crlf_sentences_need_the_mlm_objective_then_train(tmp_path):
    """A 5,000-line file with a BOM and CRLF line ends, a sentence per line, used to end
    in a ZeroDivisionError traceback: its lines give no sentence pair (exit 2, one line
    naming --objective mlm); with --objective mlm --line-by-line it trains."""
    path = write(tmp_path / 'reviews.txt',
                 '\ufeff' + '\r\n'.join(t + ' .' for t in random_texts(5000)) + '\r\n')
    code, lines, files = run_pretrain(tmp_path, '--data', path, *TINY_RUN)
    assert code == 2 and len(lines) == 1 and '--objective mlm' in lines[0], lines
    assert files == []
    code, lines, files = run_pretrain(tmp_path, '--data', path, '--objective', 'mlm',
                                      '--line-by-line', *TINY_RUN)
    assert code == 0, lines
    with open(tmp_path / 'out' / 'run.json') as f:
        text = json.load(f)['text']
    assert text['data']['texts'] == 4750 and text['valid']['texts'] == 250
    assert text['data']['words'] + text['valid']['words'] == sum(
        len(line.split()) for line in open(path, encoding='utf-8-sig'))


def test_one_ten_megabyte_line_trains(tmp_path):
    """A text of 10 MB on one line is cut into pieces of --max-len (here 64)."""
    words = onp.random.default_rng(0).choice(WORDS, 2_200_000)
    path = write(tmp_path / 'long.txt', ' '.join(words) + '\n' + ' '.join(words[:40]) + '\n')
    assert os.path.getsize(path) > 10_000_000
    code, lines, files = run_pretrain(tmp_path, '--data', path, '--objective', 'mlm',
                                      '--line-by-line', *TINY_RUN[:4], '--max-len', '64',
                                      *TINY_RUN[6:])
    assert code == 0, lines


def test_valid_is_the_held_out_text(tmp_path):
    """--valid is what the run evaluates on: in a file of one repeated word every masked
    label is that word, so its most-frequent-token baseline is 1."""
    data = write(tmp_path / 'train.jsonl', '\n'.join(json.dumps({'text': t})
                                                     for t in random_texts(400)))
    valid = write(tmp_path / 'valid.txt', '\n'.join(['film film film'] * 20))
    code, lines, files = run_pretrain(tmp_path, '--data', data, '--valid', valid,
                                      '--objective', 'mlm', '--line-by-line', *TINY_RUN)
    assert code == 0, lines
    with open(tmp_path / 'out' / 'metrics.jsonl') as f:
        held_out = [r for r in map(json.loads, f) if r.get('split') == 'valid']
    assert held_out[-1]['mlm_baseline_accuracy'] == 1.0
    with open(tmp_path / 'out' / 'run.json') as f:
        assert json.load(f)['text']['valid']['path'] == valid


def test_held_out_text_of_unknown_words_is_one_line(tmp_path):
    """A --valid of words the vocabulary lacks has nothing to mask (<unk> is never
    predicted): refused before training, not a crash at the first evaluation."""
    data = write(tmp_path / 'train.txt', '\n'.join(random_texts(400)))
    valid = write(tmp_path / 'valid.txt', '\n'.join(['zebra quokka okapi'] * 20))
    code, lines, files = run_pretrain(tmp_path, '--data', data, '--valid', valid,
                                      '--objective', 'mlm', '--line-by-line', *TINY_RUN)
    assert code == 2 and len(lines) == 1 and '--valid' in lines[0], lines
    assert files == []
