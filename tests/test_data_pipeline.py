"""load_data_wiki end to end: determinism, resume, caching, errors, vocab."""
import os

import numpy as np
import pytest

import d2lbert.data.examples as examples_module
import d2lbert.data.loader as loader_module
from d2lbert.data import (Vocab, build_pretraining_examples,
                          bundled_corpus_directory, load_data_wiki,
                          make_bundled_corpus, read_paragraphs)
from d2lbert.util.hashing import sha1_of_file
from d2lbert.data.corpus import split_wikitext_sentences
from d2lbert.data.make_bundled_corpus import generate_corpus

WIKITEXT_2_VALID = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..',
                                'shared', 'data', 'wikitext-2', 'wiki.valid.tokens')


@pytest.fixture(autouse=True)
def data_home(tmp_path, monkeypatch):
    home = tmp_path / 'home'
    monkeypatch.setenv('D2LBERT_HOME', str(home))
    return home


def all_batches(data_iter, epoch=0, start=0):
    return [tuple(np.array(a) for a in batch)
            for batch in data_iter.batches(epoch, start)]


def assert_same_batches(left, right):
    assert len(left) == len(right)
    for batch_left, batch_right in zip(left, right):
        for a, b in zip(batch_left, batch_right):
            assert a.dtype == b.dtype and np.array_equal(a, b)


def test_book_compatible_mxnet_batches():
    import mxnet as mx
    data_iter, vocab = load_data_wiki(batch_size=32, max_len=64)
    assert isinstance(vocab, Vocab) and len(vocab) > 500
    batch = next(iter(data_iter))
    assert len(batch) == 7
    assert all(isinstance(a, mx.np.ndarray) for a in batch)
    assert [str(a.dtype) for a in batch] == ['int32'] * 4 + [
        'float32', 'int32', 'int32']
    assert all(a.ctx == mx.cpu() for a in batch)
    host = next(data_iter.batches(0))
    assert all(np.array_equal(a.asnumpy(), b) for a, b in zip(batch, host))


@pytest.mark.parametrize('dynamic_masking', [False, True])
def test_same_seed_same_batches_whatever_num_workers(
        tmp_path, monkeypatch, dynamic_masking):
    monkeypatch.setattr(examples_module, 'PAIRS_PER_CHUNK', 1000)
    runs = []
    for num_workers in (0, 2):
        monkeypatch.setenv('D2LBERT_HOME', str(tmp_path / f'w{num_workers}'))
        data_iter, _ = load_data_wiki(64, 48, num_workers=num_workers,
                                      seed=5, dynamic_masking=dynamic_masking)
        runs.append(all_batches(data_iter, epoch=1))
    assert_same_batches(*runs)
    data_iter, _ = load_data_wiki(64, 48, seed=6)
    assert not np.array_equal(all_batches(data_iter, 1)[0][0], runs[0][0][0])


@pytest.mark.parametrize('dynamic_masking', [False, True])
def test_resume_equals_the_tail_of_the_epoch(dynamic_masking):
    data_iter, _ = load_data_wiki(64, 64, dynamic_masking=dynamic_masking)
    full = all_batches(data_iter, epoch=2)
    assert len(full) == len(data_iter)
    assert_same_batches(all_batches(data_iter, epoch=2, start=37), full[37:])
    assert all_batches(data_iter, epoch=2, start=len(full)) == []


def test_dynamic_masking_changes_masks_across_epochs():
    dynamic, _ = load_data_wiki(64, 64, shuffle=False, dynamic_masking=True)
    static, _ = load_data_wiki(64, 64, shuffle=False)
    epoch0, epoch1 = all_batches(dynamic, 0), all_batches(dynamic, 1)
    assert not np.array_equal(epoch0[0][0], epoch1[0][0])
    assert np.array_equal(epoch0[0][6], epoch1[0][6])  # same pairs
    assert_same_batches(all_batches(static, 0), all_batches(static, 1))


def test_epochs_are_shuffled_and_book_style_passes_advance_the_epoch():
    data_iter, _ = load_data_wiki(64, 64)
    first_pass = [batch[0].asnumpy() for batch in data_iter]
    second_pass = [batch[0].asnumpy() for batch in data_iter]
    assert_same_batches([(t,) for t in first_pass],
                        [(b[0],) for b in all_batches(data_iter, 0)])
    assert_same_batches([(t,) for t in second_pass],
                        [(b[0],) for b in all_batches(data_iter, 1)])
    assert not np.array_equal(first_pass[0], second_pass[0])


def test_cache_hit_returns_identical_examples(monkeypatch):
    path = os.path.join(bundled_corpus_directory(), 'wiki.valid.tokens')
    first = build_pretraining_examples(path, max_len=64, seed=1)

    def must_not_rebuild(*args, **kwargs):
        raise AssertionError('the cached examples were rebuilt')

    monkeypatch.setattr(loader_module, 'write_examples', must_not_rebuild)
    again = build_pretraining_examples(path, max_len=64, seed=1)
    assert again.directory == first.directory
    for name in ('second_sentences', 'lengths', 'num_preds', 'pred_positions', 'masked_ids',
                 'nsp_labels', 'first_segment_lengths'):
        assert np.array_equal(getattr(first, name), getattr(again, name))
    with pytest.raises(AssertionError, match='rebuilt'):
        build_pretraining_examples(path, max_len=63, seed=1)
    with pytest.raises(AssertionError, match='rebuilt'):
        build_pretraining_examples(path, max_len=64, seed=1, mask_prob=0.2)


def test_vocab_ids_are_fixed_sorted_and_saved(tmp_path):
    vocab = Vocab({'b': 3, 'a': 3, 'c': 5, 'rare': 1}, min_freq=2)
    assert vocab.idx_to_token == ['<pad>', '<unk>', '<cls>', '<sep>',
                                  '<mask>', 'c', 'a', 'b']
    assert (vocab.pad_id, vocab.unk_id, vocab.cls_id, vocab.sep_id,
            vocab.mask_id) == (0, 1, 2, 3, 4)
    assert vocab['a'] == 6 and vocab[['b', 'rare']] == [7, 1]
    assert vocab.to_tokens([5, 6]) == ['c', 'a'] and vocab.to_tokens(7) == 'b'
    assert vocab.token_to_idx['c'] == 5 and len(vocab) == 8
    vocab.save(tmp_path / 'vocab.json')
    assert Vocab.load(tmp_path / 'vocab.json') == vocab
    with_extra = Vocab({'a': 1}, reserved_tokens=['<eos>'])
    assert with_extra.idx_to_token[5:] == ['<eos>', 'a']
    assert with_extra.num_reserved == 6


def test_sentences_keep_their_final_period():
    assert split_wikitext_sentences(' The cat sat . It purred . \n') == [
        'The cat sat .', 'It purred .']
    assert split_wikitext_sentences('a b . c') == ['a b .', 'c']


def test_plain_text_paragraphs(tmp_path):
    per_line = tmp_path / 'lines.txt'
    per_line.write_text('One cat. Two dogs!\nSingle sentence.\nA b? C d.\n')
    assert list(read_paragraphs(str(per_line))) == [
        ['one cat.', 'two dogs!'], ['a b?', 'c d.']]
    blocks = tmp_path / 'blocks.txt'
    blocks.write_text("One cat.\nTwo dogs.\n\nThree. Four.\n\nFive.\nSix.\n")
    assert list(read_paragraphs(str(blocks))) == [  # Google's layout: blank lines break it
        ['one cat.', 'two dogs.'], ['three.', 'four.'], ['five.', 'six.']]


def test_wikitext_headings_and_short_paragraphs_are_skipped(tmp_path):
    path = tmp_path / 'wiki.train.tokens'
    path.write_text(' = Title . x . = \n \n = = A . b . = = \n'
                    ' Only one sentence . \n a . b . \n')
    assert list(read_paragraphs(str(path))) == [['a .', 'b .']]


@pytest.mark.parametrize('content, message', [
    (b'', 'is empty'),
    (b' = Heading = \n One sentence only . \n', 'no paragraph with at least'),
    (b'caf\xe9 au lait . another sentence . \n', 'not UTF-8'),
])
def test_bad_corpus_files_raise_clear_errors(tmp_path, content, message):
    path = tmp_path / 'wiki.train.tokens'
    path.write_bytes(content)
    with pytest.raises(ValueError, match=message) as error:
        load_data_wiki(8, 32, data=str(path))
    assert str(path) in str(error.value)


def test_missing_data_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match='nowhere'):
        load_data_wiki(8, 32, data=str(tmp_path / 'nowhere'))
    with pytest.raises(FileNotFoundError, match='wiki.test.tokens'):
        load_data_wiki(8, 32, data=str(tmp_path), split='test')
    with pytest.raises(FileNotFoundError, match='nowhere'):
        build_pretraining_examples(str(tmp_path / 'nowhere'))


def test_max_len_too_small_for_a_pair():
    with pytest.raises(ValueError, match='max_len=4'):
        load_data_wiki(8, 4)
    load_data_wiki(8, 5)  # <cls> a <sep> b <sep> with one token each


def test_worker_errors_surface_in_the_main_process():
    path = os.path.join(bundled_corpus_directory(), 'wiki.test.tokens')
    specials_only = Vocab({})
    with pytest.raises(ValueError, match='no non-special token'):
        build_pretraining_examples(path, vocab=specials_only, num_workers=2)


# SHA-1 of the corpus the README's and chapters' figures were measured on:
# a change to the generator (or to Python's random) must show up here.
BUNDLED_CORPUS_SHA1 = {
    'train': 'c95ec295e13e1da1117cbeee5974d5368d6f7dad',
    'valid': 'aab3a216875004cecc122433bf73be508f638f9b',
    'test': 'a1e6cf3a520f4202da5d8c0409e735dd25e64224',
}


def test_bundled_corpus_is_generated_once_and_byte_for_byte_stable(monkeypatch):
    directory = bundled_corpus_directory()
    total = 0
    for split, expected in BUNDLED_CORPUS_SHA1.items():
        path = os.path.join(directory, f'wiki.{split}.tokens')
        assert sha1_of_file(path) == expected, split
        total += os.path.getsize(path)
    assert total < 1_000_000

    def generate_again(directory):
        raise AssertionError('the cached corpus was generated again')
    monkeypatch.setattr(make_bundled_corpus, 'main', generate_again)
    assert bundled_corpus_directory() == directory
    assert generate_corpus(seed=1)['valid'] != generate_corpus()['valid']


@pytest.mark.skipif(not os.path.isfile(WIKITEXT_2_VALID),
                    reason='WikiText-2 validation file not available')
def test_benchmark_runs_on_a_slice_of_wikitext_2(tmp_path):
    from d2lbert.bench.data_pipeline import bench_data_pipeline
    with open(WIKITEXT_2_VALID, encoding='utf-8') as f:
        lines = f.readlines()[:400]
    path = tmp_path / 'wiki.valid.tokens'
    path.write_text(''.join(lines), encoding='utf-8')
    result = bench_data_pipeline(str(path), max_len=64)
    assert result['d2lbert_examples'] >= result['d2l_examples'] > 0
    assert result['speedup'] > 2


def test_a_worker_that_dies_is_a_clear_error_not_a_hang(monkeypatch):
    monkeypatch.setattr(examples_module, 'build_chunk',
                        lambda *args: os._exit(3))
    with pytest.raises(RuntimeError, match='worker process .* died'):
        load_data_wiki(8, 32, num_workers=2)


def test_dataset_item_is_the_books_tuple():
    path = os.path.join(bundled_corpus_directory(), 'wiki.test.tokens')
    examples = build_pretraining_examples(path, max_len=40)
    item = examples[-1]
    assert len(item) == 7 and item[0].shape == (40,) and item[3].shape == (6,)
    assert item[0][0] == 2 and item[0][int(item[2]) - 1] == 3
    assert len(examples) == len(examples.lengths)
