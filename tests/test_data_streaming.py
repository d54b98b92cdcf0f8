"""A corpus of any size: small cache, fast WordPiece encoding, progress, kills (issue 43).

All on small generated corpora; the sizes and timings of a 540 MB corpus are in
docs/pretraining.md.
"""
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import tracemalloc
import weakref

import numpy as np
import pytest

from d2lbert.data import progress
from d2lbert.data.corpus import read_paragraphs
from d2lbert.data.batches import PretrainingBatches
from d2lbert.data.encoding import TokenizedCorpus, count_tokens, token_dtype
from d2lbert.data.loader import build_pretraining_examples
from d2lbert.data.make_bundled_corpus import generate_corpus
from d2lbert.data.subwords import prepare_sentence, sentence_encoder
from d2lbert.data.vocab import Vocab
from d2lbert.data.wordpiece import WordPieceVocab
from d2lbert.util.files import OUR_TEMPORARIES, host_name, sweep_temporaries

# SHA-1 of every batch of epochs 0 and 1 of the corpus `small_corpus`, words vocabulary,
# max_len 64, seed 0, batch size 32, as the pipeline before issue 43 made them (it
# stored every example's tokens, int32): the new cache must give the same batches.
OLD_PIPELINE_BATCHES = {True: '2f377ea6b4e7fca37504bb9300757a74d2d51e5b',
                        False: '50ed8dfcadcd3276d04923cfbbc27b984dc63ecc'}


@pytest.fixture(autouse=True)
def data_home(tmp_path, monkeypatch):
    monkeypatch.setenv('D2LBERT_HOME', str(tmp_path / 'home'))


@pytest.fixture(scope='module')
def small_corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp('corpus') / 'wiki.small.tokens'
    path.write_text(generate_corpus(seed=7, num_articles={'train': 300})['train'],
                    encoding='utf-8')
    return str(path)


def batches_digest(examples):
    digest = hashlib.sha1()
    data_iter = PretrainingBatches(examples, 32, True, 16, 'keep')
    for epoch in (0, 1):
        for batch in data_iter.batches(epoch):
            for array in batch:
                digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


@pytest.mark.parametrize('dynamic_masking', [True, False])
def test_batches_equal_the_old_pipelines(small_corpus, dynamic_masking):
    examples = build_pretraining_examples(small_corpus, 64, 0,
                                          dynamic_masking=dynamic_masking)
    assert batches_digest(examples) == OLD_PIPELINE_BATCHES[dynamic_masking]


def test_cache_stores_no_copy_of_the_tokens(small_corpus):
    """The examples are sentence indices: the whole cache is smaller than the text."""
    examples = build_pretraining_examples(small_corpus, 64, 0, dynamic_masking=True)
    corpus_folder = os.path.dirname(examples.directory)
    assert sorted(os.listdir(examples.directory)) == [
        'manifest.json', 'options.json', 'second_sentences.int32']
    assert examples.corpus.token_ids.dtype == np.uint16
    cache_bytes = sum(os.path.getsize(os.path.join(folder, name))
                      for folder, _, names in os.walk(corpus_folder) for name in names)
    assert cache_bytes < 0.6 * os.path.getsize(small_corpus)


def test_token_dtype_holds_every_id():
    assert token_dtype(65536) == np.uint16
    assert token_dtype(65537) == np.int32


@pytest.mark.parametrize('num_words', [65531, 65540])
def test_ids_near_and_over_65536_are_stored_exactly(tmp_path, num_words):
    """A vocabulary of 65,536 tokens (5 special + 65,531 words) fits uint16; one more
    falls back to int32, and the largest ids come back as they went in."""
    vocab = Vocab({f'w{i}': 2 for i in range(num_words)})
    words = vocab.idx_to_token
    paragraphs = [[' '.join(words[-7:]) + ' .', ' '.join(words[5:8]) + ' .']] * 3
    corpus = TokenizedCorpus.write(paragraphs, vocab, str(tmp_path))
    assert corpus.token_ids.dtype == token_dtype(len(vocab))
    expected = [vocab[sentence.split()] for paragraph in paragraphs
                for sentence in paragraph]
    assert corpus.token_ids.tolist() == [i for ids in expected for i in ids]
    assert max(corpus.token_ids) == len(vocab) - 1


TRICKY_TEXT = [
    'The café\u0301 ( Zürich ) sold 1 @,@ 000 naïve crème @-@ brûlée , didn\'t it ?',
    'A <unk> and [MASK] written in text , x[SEP]y , 東京 and ＡＢＣ full @.@ width .',
    'tabs\tand\xa0no @-@ break spaces , a\x1cb control , zero\u200bwidth , ' + 'x' * 120,
    'supercalifragilisticexpialidocious antidisestablishmentarianism ' * 3,
]


@pytest.mark.parametrize('lowercase', [True, False])
def test_wordpiece_encoder_equals_the_tokenizer(lowercase):
    """The per-word cache gives the ids of tokenizing whole sentences (`tokenize`,
    itself checked against transformers in test_interop_wordpiece), also when
    the cache is smaller than the words."""
    pieces = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', 'the', 'caf', '##e', 'a',
              '##b', 'x', '##x', 'and', ',', '.', '(', ')', 'super', '##cal', 'an',
              '##ti', 'zu', '##rich', '東', 'ab', '##c', 'c', 'A', 'The', 'T', '##he']
    vocab = WordPieceVocab(pieces, lowercase)
    for cache_size in (1 << 10, 2):
        encode = sentence_encoder(vocab, cache_size)
        for sentence in TRICKY_TEXT * 2:
            assert encode(sentence) == vocab[vocab.tokenize(prepare_sentence(sentence))]


def test_progress_lines(small_corpus, monkeypatch, capsys):
    monkeypatch.setattr(progress, 'PRINT_EVERY', 0)
    build_pretraining_examples(small_corpus, 64, 0)
    lines = capsys.readouterr().err.splitlines()
    for task in ('counting words', 'encoding'):
        ours = [line for line in lines if f'wiki.small.tokens: {task} ' in line]
        assert any('MB of' in line and 'MB/s' in line and 's left' in line
                   for line in ours), lines
        assert ours[-1].endswith('s') and '(100%), done in' in ours[-1]


def test_counting_holds_one_paragraph_at_a_time():
    """count_tokens's memory is its counts: it never keeps a paragraph it has read."""
    class Paragraph(list):  # a list that can be watched by a weak reference
        pass
    seen = []

    def paragraphs():
        for i in range(1000):
            paragraph = Paragraph([f'w{i % 7} a .', 'b c .'])
            seen.append(weakref.ref(paragraph))
            assert sum(ref() is not None for ref in seen) <= 2
            yield paragraph
    counts = count_tokens(paragraphs())
    assert counts['a'] == 1000 and len(counts) == 11



def mixed_text_file(path):
    """A small file of every kind of line: headings, blank runs, several sentences on a
    line, capitals, CRLF line ends, spaces around."""
    rng = np.random.default_rng(0)
    words = 'The cat . sat on A mat ! Why ? = Title = @-@ Paris. dog'.split()
    lines = [' '.join(rng.choice(words, rng.integers(0, 9))) for _ in range(400)]
    with open(path, 'w', encoding='utf-8', newline='') as f:
        f.write('\r\n'.join(lines) + '\n')
    return str(path)


# SHA-1 of repr(list(read_paragraphs(mixed_text_file, layout, lowercase, min_texts))) for
# each layout, as the reader made them before it streamed a document line by line
# (issue 52): the streaming reader must read every layout alike.
READ_BEFORE_STREAMING = {
    ('wikitext', True, 2): 'c103995ab122dfa305259e9ccd8524a4bbc2c2df',
    ('paragraphs', True, 2): '4a84f437a6dd8d879d37cc2dfb04f1b917c38fee',
    ('sentences', True, 2): 'f6faf6a1375faf37f936e5c87b09c2aaf06d67d9',
    ('lines', True, 2): '97d170e1550eee4afc0af065b78cda302a97674c',
    ('wikitext', False, 1): '020a7c76d730852abd710fff0e00140a11aa6820',
    ('paragraphs', False, 1): '056fa07bd12b144a8a5a6a75c1f2d922180793d5',
    ('sentences', False, 1): 'cf37c04eb19f598b5d4f399c32a0ad905a110d8a',
    ('lines', False, 1): '730071d59461c6823ad4ff86f60056d22998529c',
}


@pytest.mark.parametrize('layout', ['wikitext', 'paragraphs', 'sentences', 'lines'])
@pytest.mark.parametrize('lowercase, min_texts', [(True, 2), (False, 1)])
def test_reading_is_as_before_streaming(tmp_path, layout, lowercase, min_texts):
    path = mixed_text_file(tmp_path / 'mixed.txt')
    documents = list(read_paragraphs(path, layout, lowercase, min_texts))
    digest = hashlib.sha1(repr(documents).encode()).hexdigest()
    assert digest == READ_BEFORE_STREAMING[layout, lowercase, min_texts]


def test_google_layout_holds_a_document_once(tmp_path):
    """A document of Google's layout (one of 60,000 lines here) is built line by line:
    reading it takes little more memory than the document read (its texts), not the
    three copies (lines, lowercased lines, sentences) it took before issue 52."""
    path = tmp_path / 'one_document.txt'
    with open(path, 'w', encoding='utf-8') as f:
        f.write('A first line.\n\n' + ''.join(f'  The Sentence Number {i} Of A Long Document '
                                                'Of Many Lines.  \n' for i in range(60000)))
    tracemalloc.start()
    try:
        documents = read_paragraphs(str(path), 'sentences', min_sentences=2)
        document = next(documents)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    held = sys.getsizeof(document) + sum(sys.getsizeof(text) for text in document)
    assert len(document) == 60000 and peak < 1.5 * held, (peak, held)



PAUSED_PREPARATION = '''
import os, sys, time
from d2lbert.data import loader
corpus, log, go = sys.argv[1:]

class PausedProgress(loader.ReadProgress):
    """Logs each pass over the corpus, which waits for the file `go`."""
    def __init__(self, path, task, *args, **kwargs):
        with open(log, 'a') as f:
            f.write(f'{os.getpid()} {task}\\n')
        while not os.path.exists(go):
            time.sleep(0.05)
        super().__init__(path, task, *args, **kwargs)

loader.ReadProgress = PausedProgress
loader.build_pretraining_examples(corpus, 64, 0)
'''


def test_processes_preparing_one_corpus_take_turns(small_corpus, tmp_path):
    """Two processes preparing one corpus in one D2LBERT_HOME (the workers of a job on
    one machine): while the first reads it, the second waits, saying so in one line;
    then it uses the first's cache and never reads the corpus."""
    log, go = tmp_path / 'passes.log', tmp_path / 'go'
    errors = [tmp_path / 'first.err', tmp_path / 'second.err']
    processes = []
    try:
        for error in errors:
            with open(error, 'w') as stderr:
                processes.append(subprocess.Popen(
                    [sys.executable, '-c', PAUSED_PREPARATION, small_corpus, str(log),
                     str(go)], stderr=stderr))
            while not log.exists() or (len(processes) == 2 and 'waiting' not in
                                       errors[1].read_text()
                                       and len(log.read_text().splitlines()) < 2):
                assert all(process.poll() is None for process in processes)
                time.sleep(0.05)
        go.touch()
        assert [process.wait(120) for process in processes] == [0, 0]
    finally:
        for process in processes:
            process.kill()
    passes = log.read_text().splitlines()
    assert passes == [f'{processes[0].pid} counting words', f'{processes[0].pid} encoding']
    waited = [line for line in errors[1].read_text().splitlines() if 'waiting' in line]
    assert len(waited) == 1 and waited[0].startswith(
        f'd2lbert: {small_corpus}: waiting for another process preparing it (the cache '
        f'{os.environ["D2LBERT_HOME"]}'), waited



def test_a_sweep_leaves_another_machines_temporaries(tmp_path):
    """With D2LBERT_HOME on a shared file system, a process id says nothing of another
    machine's processes: their temporary folders are left alone. This machine's dead
    processes' are removed, and so are an older d2lbert's (named without a machine)."""
    dead = subprocess.run([sys.executable, '-c', 'import os; print(os.getpid())'],
                          capture_output=True, text=True).stdout.strip()
    names = {'other': f'{OUR_TEMPORARIES}other-host.example@{dead}-abc',
             'mine': f'{OUR_TEMPORARIES}{host_name()}@{dead}-abc',
             'older': f'{OUR_TEMPORARIES}{dead}-abc'}
    for name in names.values():
        (tmp_path / name).mkdir()
    sweep_temporaries(str(tmp_path))
    assert os.listdir(tmp_path) == [names['other']]

KILLED_RUN = '''
import sys
from d2lbert.data import progress
from d2lbert.data.corpus import read_paragraphs
from d2lbert.data.loader import build_pretraining_examples
progress.PRINT_EVERY = 0.01
build_pretraining_examples(sys.argv[1], 64, 0, vocab_kind='wordpiece', vocab_size=300)
'''


def test_kill_mid_encoding_then_rerun_trains(tmp_path):
    """SIGKILL while the corpus is encoded leaves no entry a later run would read, and
    `pretrain` on the same corpus then trains, removing the killed run's temporary
    folder."""
    folder = tmp_path / 'corpus'
    folder.mkdir()
    text = generate_corpus(seed=3, num_articles={'train': 600, 'valid': 20})
    for split in ('train', 'valid'):
        (folder / f'wiki.{split}.tokens').write_text(text[split] * (4 if split == 'train'
                                                                    else 1))
    env = dict(os.environ, D2LBERT_HOME=str(tmp_path / 'home'), OMP_NUM_THREADS='1')
    run = subprocess.Popen([sys.executable, '-c', KILLED_RUN,
                            str(folder / 'wiki.train.tokens')], env=env,
                           stderr=subprocess.PIPE, text=True)
    for line in run.stderr:
        if ': encoding ' in line:
            break
    else:
        pytest.fail('the run never reached encoding')
    run.send_signal(signal.SIGKILL)
    run.wait()
    cache = tmp_path / 'home' / 'cache'
    entries = [name for _, folders, _ in os.walk(cache) for name in folders
               if name.startswith(('corpus-', 'examples-'))]
    assert entries == []
    leftovers = [name for _, folders, _ in os.walk(cache) for name in folders
                 if name.startswith(OUR_TEMPORARIES)]
    assert len(leftovers) == 1  # the killed run's, removed by the next one:
    out = tmp_path / 'run'
    done = subprocess.run([sys.executable, '-m', 'd2lbert', 'pretrain', '--data',
                           str(folder), '--steps', '2', '--preset', 'book',
                           '--batch-size', '8', '--vocab-size', '300', '--out', str(out),
                           '--no-progress'], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    with open(out / 'metrics.jsonl') as f:
        assert 2 in [json.loads(line).get('step') for line in f]
    assert not [name for _, folders, _ in os.walk(cache) for name in folders
                if name.startswith(OUR_TEMPORARIES)]


def resident_kilobytes(path):
    """The resident memory of this process's mappings of the file `path` (smaps)."""
    with open('/proc/self/smaps') as f:
        lines = f.read().splitlines()
    starts = [i for i, line in enumerate(lines) if line.endswith(' ' + path)]
    assert starts, f'{path} is not mapped'
    return sum(next(int(entry.split()[1]) for entry in lines[i + 1:]
                    if entry.startswith('Rss:')) for i in starts)


@pytest.mark.skipif(not os.path.isfile('/proc/self/smaps'), reason='needs Linux /proc')
def test_reading_examples_does_not_keep_the_token_pages(small_corpus):
    """Batches of random sentences would map the whole token file into the process's
    memory over a long run: the pages read are released after each batch."""
    examples = build_pretraining_examples(small_corpus, 64, 0, dynamic_masking=True)
    token_file = os.path.join(os.path.dirname(examples.directory), 'token_ids.uint16')
    assert os.path.getsize(token_file) > 8 * 4096
    rng = np.random.default_rng(0)
    for start in range(0, len(examples), 500):
        examples.masked_tokens(np.arange(start, min(start + 500, len(examples))), rng)
    assert resident_kilobytes(token_file) <= 4
    assert int(examples.corpus.token_ids.sum()) > 0  # readable after the release
