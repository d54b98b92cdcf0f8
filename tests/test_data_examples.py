"""Statistics and exact structure of the pretraining examples and batches."""
import numpy as np
import pytest

from d2lbert.data import build_pretraining_examples, read_paragraphs
from d2lbert.data.batches import PretrainingBatches, bucket_lengths
from d2lbert.data.encoding import TokenizedCorpus
from d2lbert.data.examples import assemble_pairs, truncate_longest_first
from d2lbert.data.make_bundled_corpus import generate_corpus
from d2lbert.data.masking import num_predictions
from d2lbert.data.ragged import offsets_from_lengths

MAX_LEN = 32  # short, so that many pairs need truncating


@pytest.fixture(autouse=True)
def data_home(tmp_path, monkeypatch):
    monkeypatch.setenv('D2LBERT_HOME', str(tmp_path / 'home'))


@pytest.fixture(scope='module')
def big_corpus(tmp_path_factory):
    """A generated WikiText corpus with over 20,000 sentence pairs."""
    path = tmp_path_factory.mktemp('corpus') / 'wiki.train.tokens'
    path.write_text(generate_corpus(seed=7, num_articles={'train': 3600})
                    ['train'], encoding='utf-8')
    return str(path)


@pytest.fixture(scope='module')
def built(big_corpus, tmp_path_factory):
    """(examples, reference sentences as id lists, paragraph of sentence)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv('D2LBERT_HOME', str(tmp_path_factory.mktemp('home')))
        examples = build_pretraining_examples(big_corpus, max_len=MAX_LEN,
                                              seed=3)
    sentences, paragraph_of = [], []
    for index, paragraph in enumerate(read_paragraphs(big_corpus)):
        for sentence in paragraph:
            sentences.append(examples.vocab[sentence.split()])
            paragraph_of.append(index)
    return examples, sentences, np.array(paragraph_of)


def truncate_like_google(a, b, max_num_tokens):
    """The loop of Google's create_pretraining_data.py (end truncation)."""
    a, b = list(a), list(b)
    while len(a) + len(b) > max_num_tokens:
        (a if len(a) > len(b) else b).pop()
    return a, b


def expected_tokens(examples, sentences, i):
    vocab = examples.vocab
    a, b = truncate_like_google(sentences[examples.first_sentences[i]],
                                sentences[examples.second_sentences[i]],
                                MAX_LEN - 3)
    return [vocab.cls_id] + a + [vocab.sep_id] + b + [vocab.sep_id], len(a)


def test_enough_examples_and_all_within_max_len(built):
    examples, _, _ = built
    assert len(examples) >= 20000
    assert examples.lengths.max() <= MAX_LEN
    assert examples.lengths.min() >= 5


@pytest.fixture(scope='module')
def masked(built):
    """The masked tokens of all examples, with their token and prediction offsets."""
    examples = built[0]
    masked = examples.masked_tokens(np.arange(len(examples)))
    return (masked, offsets_from_lengths(examples.lengths),
            offsets_from_lengths(masked.num_preds))


def test_tokens_and_labels_match_the_corpus_exactly(built, masked):
    examples, sentences, _ = built
    vocab = examples.vocab
    masked, token_offsets, pred_offsets = masked
    for i in range(len(examples)):
        expected, len_a = expected_tokens(examples, sentences, i)
        start, end = token_offsets[i], token_offsets[i + 1]
        tokens = masked.token_ids[start:end]
        p_start, p_end = pred_offsets[i], pred_offsets[i + 1]
        positions = masked.pred_positions[p_start:p_end]
        labels = masked.labels[p_start:p_end]
        assert len(tokens) == len(expected) == examples.lengths[i]
        assert examples.first_segment_lengths[i] == len_a + 2
        assert np.array_equal(labels, np.array(expected)[positions])
        unchanged = np.ones(len(tokens), bool)
        unchanged[positions] = False
        assert np.array_equal(tokens[unchanged],
                              np.array(expected)[unchanged])
        assert np.all(np.diff(positions) > 0)
        candidates = np.sum(np.array(expected) >= vocab.num_reserved)
        assert len(positions) == num_predictions(candidates)


def test_masking_rates(built, masked):
    examples, _, _ = built
    vocab = examples.vocab
    masked, token_offsets, _ = masked
    original = np.array(masked.token_ids)
    flat_positions = (np.repeat(token_offsets[:-1], masked.num_preds)
                      + masked.pred_positions)
    original[flat_positions] = masked.labels
    num_candidates = np.sum(original >= vocab.num_reserved)
    assert abs(len(flat_positions) / num_candidates - 0.15) < 0.005

    labels = masked.labels
    inputs = masked.token_ids[flat_positions]
    assert np.all(labels >= vocab.num_reserved), 'a special token was chosen'
    assert np.all((inputs == vocab.mask_id) | (inputs >= vocab.num_reserved)), \
        'a special token was used as a random replacement'
    masked = np.mean(inputs == vocab.mask_id)
    unchanged = np.mean(inputs == labels)
    replaced = 1 - masked - unchanged
    assert abs(masked - 0.8) < 0.015
    assert abs(unchanged - 0.1) < 0.015
    assert abs(replaced - 0.1) < 0.015


def test_next_sentence_labels(built):
    examples, _, paragraph_of = built
    first, second = examples.first_sentences, examples.second_sentences
    is_next = examples.nsp_labels == 1
    assert abs(is_next.mean() - 0.5) < 0.015
    assert np.all(second[is_next] == first[is_next] + 1)
    assert np.all(paragraph_of[first] == paragraph_of[first + 1])
    assert np.all(paragraph_of[second[~is_next]]
                  != paragraph_of[first[~is_next]])


def test_batch_layout(built):
    examples, _, _ = built
    vocab = examples.vocab
    data_iter = PretrainingBatches(examples, batch_size=256)
    seen = []
    for batch in data_iter.batches(0):
        tokens, segments, valid_lens, positions, weights, labels, nsp = batch
        batch_size, seq_len = tokens.shape
        assert tokens.dtype == segments.dtype == valid_lens.dtype == np.int32
        assert positions.dtype == labels.dtype == nsp.dtype == np.int32
        assert weights.dtype == np.float32
        assert seq_len in bucket_lengths(MAX_LEN)
        assert seq_len - 16 < valid_lens.max() <= seq_len
        column = np.arange(seq_len)
        inside = column < valid_lens[:, None]
        assert np.all(tokens[~inside] == 0) and np.all(tokens[:, 0] == 2)
        is_sep = tokens == vocab.sep_id
        assert np.all(is_sep.sum(1) == 2)
        assert np.all(tokens[np.arange(batch_size), valid_lens - 1] == 3)
        first_sep = is_sep.argmax(1)
        assert np.array_equal(segments, ((column > first_sep[:, None])
                                         & inside).astype(np.int32))
        num_real = weights.sum(1).astype(int)
        slots = np.arange(weights.shape[1]) < num_real[:, None]
        assert np.array_equal(weights, slots.astype(np.float32))
        assert np.all(positions[~slots] == 0) and np.all(labels[~slots] == 0)
        assert np.all(positions[slots] > 0)
        assert np.all(positions < valid_lens[:, None])
        seen.append(batch.tokens.shape[0])
    assert sum(seen) == len(examples)
    assert len(seen) == len(data_iter) == -(-len(examples) // 256)


def test_truncation_is_longest_first_on_a_hand_made_pair(tmp_path):
    path = tmp_path / 'wiki.train.tokens'
    path.write_text(' one two three four five six . seven eight . \n'
                    ' nine ten . eleven twelve . \n')
    paragraphs = list(read_paragraphs(str(path)))
    from d2lbert.data import Vocab
    from d2lbert.data.encoding import count_tokens
    vocab = Vocab(count_tokens(paragraphs))
    corpus = TokenizedCorpus.write(paragraphs, vocab, str(tmp_path))
    # a has 7 tokens, b has 3; max_len 10 leaves 7 for both: a loses 3.
    tokens, lengths, first_segment = assemble_pairs(
        corpus, np.array([0]), np.array([1]), 10, vocab)
    assert vocab.to_tokens(tokens) == [
        '<cls>', 'one', 'two', 'three', 'four', '<sep>',
        'seven', 'eight', '.', '<sep>']
    assert lengths.tolist() == [10] and first_segment.tolist() == [6]
    # max_len 7 leaves 4: a is cut to 3 tokens, then the tie goes to b.
    tokens, _, _ = assemble_pairs(corpus, np.array([0]), np.array([1]), 7,
                                  vocab)
    assert vocab.to_tokens(tokens) == [
        '<cls>', 'one', 'two', '<sep>', 'seven', 'eight', '<sep>']


def test_truncation_matches_googles_loop():
    rng = np.random.default_rng(0)
    len_a, len_b = rng.integers(1, 40, 2000), rng.integers(1, 40, 2000)
    budget = rng.integers(2, 60, 2000)
    for a, b, n, got_a, got_b in zip(len_a, len_b, budget,
                                     *truncate_longest_first(len_a, len_b,
                                                             budget)):
        want_a, want_b = truncate_like_google(range(a), range(b), n)
        assert (got_a, got_b) == (len(want_a), len(want_b))


def test_random_next_sentence_is_uniform_over_other_paragraphs():
    from types import SimpleNamespace
    from d2lbert.data.examples import choose_second_sentences
    # Three paragraphs of 4, 4 and 2 sentences: a random sentence would fall
    # in the first sentence's own paragraph 40% of the time.
    corpus = SimpleNamespace(paragraph_offsets=np.array([0, 4, 8, 10]),
                             num_sentences=10)
    paragraph_of = np.repeat([0, 1, 2], [4, 4, 2])
    first = np.tile([0, 1, 2, 4, 5, 6, 8], 3000)
    second, is_next = choose_second_sentences(
        first, corpus, paragraph_of, np.random.default_rng(0))
    negative = is_next == 0
    assert np.all(paragraph_of[second[negative]]
                  != paragraph_of[first[negative]])
    from_first = second[negative & (paragraph_of[first] == 0)]
    counts = np.bincount(from_first, minlength=10)[4:] / len(from_first)
    assert np.all(np.abs(counts - 1 / 6) < 0.03)  # sentences 4..9, uniform


def test_valid_batches_are_a_fair_sample(built, monkeypatch):
    """An evaluation of `max_batches` (pretrain --valid-batches) reads that many distinct
    batches of the epoch, each as `batches(0)` makes it (masks included), the same at
    every call; over seeds, every batch can be drawn, and the largest, which the epoch
    puts first (`plan_epoch`), in about the sample's share of the draws (it was in all)."""
    from d2lbert.pretraining import evaluate
    read = []
    monkeypatch.setattr(evaluate, 'shard_losses', lambda net, batch, ctx, with_accuracy:
                        read.append(batch) or [1.0] * 4)
    data_iter = PretrainingBatches(built[0], batch_size=2048)
    num_batches, num_seeds, largest_drawn, drawn = 3, 40, 0, set()
    for seed in range(num_seeds):
        data_iter.seed = seed
        epoch = [batch.tokens.tobytes() + batch.mlm_labels.tobytes()
                 for batch in data_iter.batches(0)]
        for _ in range(2):
            read.clear()
            evaluate.evaluate(None, data_iter, None, max_batches=num_batches)
            places = [epoch.index(batch.tokens.tobytes() + batch.mlm_labels.tobytes())
                      for batch in read]
            assert len(set(places)) == num_batches
        largest_drawn += 0 in places
        drawn.update(places)
    share = num_batches / len(epoch)
    assert drawn == set(range(len(epoch)))
    assert abs(largest_drawn / num_seeds - share) < 4 * (share * (1 - share) / num_seeds) ** 0.5
