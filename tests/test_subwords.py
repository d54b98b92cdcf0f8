"""Subwords for pretraining (`pretrain --vocab wordpiece`): the vocabulary learned with
Hugging Face's `tokenizers` tokenizes as Hugging Face does, whole words are masked
together, the held-out word accuracy counts words with every piece right, and the run
folder carries the vocabulary to finetune, predict and encode."""
import json
import os

import numpy as onp
import pytest

import d2lbert
from d2lbert.cli import main
from d2lbert.data import bundled_corpus_directory, read_paragraphs
from d2lbert.data.masking import mask_whole_words
from d2lbert.data.ragged import offsets_from_lengths
from d2lbert.data.subwords import (continuation_ids, prepare_sentence, sentence_encoder,
                                   train_wordpiece)
from d2lbert.pretraining.evaluate import whole_words_right

BUNDLED = os.path.join(bundled_corpus_directory(), 'wiki.train.tokens')


@pytest.fixture(scope='module')
def sentences():
    return [s for paragraph in read_paragraphs(BUNDLED) for s in paragraph]


@pytest.fixture(scope='module')
def vocab(sentences):
    return train_wordpiece(sentences, vocab_size=400)


def test_the_learned_vocabulary_tokenizes_as_hugging_face(vocab, sentences, tmp_path):
    """Special tokens at ids 0..4 (d2lbert's fixed ids); at most vocab_size pieces,
    some of them '##' continuations; and `transformers.BertTokenizer` reading the saved
    vocab.txt splits every sentence of the corpus into the same pieces."""
    transformers = pytest.importorskip('transformers')
    assert vocab.idx_to_token[:5] == ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']
    assert (vocab.pad_id, vocab.unk_id, vocab.cls_id, vocab.sep_id, vocab.mask_id) == (
        0, 1, 2, 3, 4)
    assert vocab.num_reserved == 5 and 300 < len(vocab) <= 400
    assert continuation_ids(vocab).sum() > 20
    vocab.save(str(tmp_path / 'vocab.txt'))
    reference = transformers.BertTokenizer(str(tmp_path / 'vocab.txt'), do_lower_case=True)
    encode = sentence_encoder(vocab)
    for sentence in sentences[:500]:
        assert encode(sentence) == reference.convert_tokens_to_ids(
            reference.tokenize(prepare_sentence(sentence)))


def test_wikitext_markup_becomes_plain_text():
    assert prepare_sentence('the <unk> of 1 @,@ 000 well @-@ known 3 @.@ 5 .') == \
        'the [UNK] of 1,000 well - known 3.5 .'


def words_of(is_candidate, is_continuation):
    """[(first, last)] flat token ranges of the words: a reference loop."""
    words = []
    for i, (candidate, continues) in enumerate(zip(is_candidate, is_continuation)):
        if candidate and continues and words and words[-1][1] == i - 1 \
                and is_candidate[i - 1]:
            words[-1] = (words[-1][0], i)
        elif candidate:
            words.append((i, i))
    return words


def test_whole_words_are_masked_together_within_the_budget():
    """Random sequences of words of 1 to 3 pieces: every chosen piece belongs to a word
    chosen whole, each sequence gets at most its budget of predictions and at least one
    word when one fits, and over many draws every word of a sequence is chosen about
    equally often whatever its position."""
    rng = onp.random.default_rng(0)
    vocab_size, num_reserved = 40, 5
    continuation = onp.arange(vocab_size) >= 30  # ids 30..39 continue a word
    sequences = []
    for _ in range(200):
        pieces = [2]
        for _ in range(rng.integers(2, 12)):
            pieces += [int(rng.integers(5, 30))] + list(rng.integers(30, 40,
                                                                    rng.integers(0, 3)))
        sequences.append(pieces + [3])
    lengths = onp.array([len(s) for s in sequences])
    token_ids = onp.concatenate(sequences).astype(onp.int32)
    starts = offsets_from_lengths(lengths)[:-1]
    chosen_counts = onp.zeros(len(token_ids))
    for draw in range(200):
        masked = mask_whole_words(token_ids, lengths, onp.random.default_rng(draw),
                                  vocab_size,
                                  num_reserved, 4, continuation)
        positions = starts[onp.repeat(onp.arange(len(lengths)), masked.num_preds)] \
            + masked.pred_positions
        chosen = onp.zeros(len(token_ids), dtype=bool)
        chosen[positions] = True
        chosen_counts += chosen
        words = words_of(token_ids >= num_reserved, continuation[token_ids])
        for first, last in words:
            assert chosen[first:last + 1].all() or not chosen[first:last + 1].any()
        budgets = onp.maximum(1, onp.round(0.15 * (lengths - 2)))
        assert (masked.num_preds <= budgets).all()
        for seq, (start, length) in enumerate(zip(starts, lengths)):
            sizes = [last - first + 1 for first, last in words
                     if start <= first < start + length]
            if min(sizes) <= budgets[seq]:
                assert masked.num_preds[seq] >= 1
        assert (masked.labels == token_ids[positions]).all()
    # the first and the last word of a sequence are chosen about equally often
    firsts = [first for first, _ in words if first - 1 in starts]
    lasts = [first for first, last in words if last + 2 in starts + lengths]
    assert len(firsts) == len(lasts) == len(sequences)
    first_rate, last_rate = chosen_counts[firsts].mean(), chosen_counts[lasts].mean()
    assert abs(first_rate - last_rate) < 0.1 * first_rate, (first_rate, last_rate)


def test_word_accuracy_counts_words_with_every_piece_right():
    """whole_words_right against a loop over the slots."""
    continuation = onp.array([False] * 30 + [True] * 10)
    labels = onp.array([[7, 31, 32, 8, 9, 0], [33, 10, 34, 11, 0, 0]])
    weights = onp.array([[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 0, 0]], dtype=onp.float32)
    correct = onp.array([[1, 1, 0, 1, 1, 1], [1, 1, 1, 0, 1, 1]], dtype=bool)
    # words: [7 31 32] wrong, [8] right, [9] right; [33] (a row's first slot) right,
    # [10 34] right, [11] wrong
    assert whole_words_right(correct, labels, weights, continuation) == (6, 4)


def test_a_wordpiece_run_carries_its_vocabulary_to_every_command(tmp_path):
    """pretrain --vocab wordpiece on the bundled corpus: the run folder holds vocab.txt,
    held-out records carry word_mlm_accuracy, load_pretrained gives the vocabulary the
    corpus was encoded with, and encode tokenizes text into its pieces."""
    out = str(tmp_path / 'run')
    assert main(['pretrain', '--vocab', 'wordpiece', '--vocab-size', '500', '--steps', '4',
                 '--batch-size', '16', '--eval-every', '2', '--out', out,
                 '--no-progress']) == 0
    assert os.path.isfile(os.path.join(out, 'vocab.txt'))
    with open(os.path.join(out, 'metrics.jsonl')) as f:
        held_out = [json.loads(line) for line in f if '"valid"' in line]
    assert len(held_out) == 2
    assert all(0 <= r['word_mlm_accuracy'] <= 1 for r in held_out)
    net, vocab = d2lbert.load_pretrained(out)
    assert isinstance(vocab, d2lbert.data.WordPieceVocab) and len(vocab) <= 500
    _, encoded_with = d2lbert.load_data_wiki(16, 64, vocab_kind='wordpiece', vocab_size=500)
    assert vocab == encoded_with
    save = str(tmp_path / 'vectors.npy')
    assert main(['encode', '--model', out, 'Cranes are flying', '--save', save]) == 0
    assert onp.load(save).shape[0] == len(vocab.tokenize('Cranes are flying')) + 2


def test_real_text_defaults_to_word_pieces_the_bundled_corpus_to_words():
    """Without --vocab: words for the bundled corpus (the book's recipe, the default job
    unchanged), word pieces for any other text; --vocab decides when given."""
    from d2lbert.pretraining.pretrain import PretrainOptions, vocabulary
    assert vocabulary(PretrainOptions()) == 'words'
    assert vocabulary(PretrainOptions(data='wikitext-2')) == 'wordpiece'
    assert vocabulary(PretrainOptions(data='my/text.txt')) == 'wordpiece'
    assert vocabulary(PretrainOptions(data='my/text.txt', vocab='words')) == 'words'
    assert vocabulary(PretrainOptions(vocab='wordpiece')) == 'wordpiece'
    with pytest.raises(ValueError, match='--vocab'):
        PretrainOptions(vocab='bytes')
