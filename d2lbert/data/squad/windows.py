"""From questions and passages to BERT's inputs: overlapping windows over the passage.

The question and the passage go in as a pair (Google's BERT, GluonNLP 0.10 and
Hugging Face do the same)::

    tokens    <cls>  q1 .. qm  <sep>  p_i .. p_j  <sep>
    segments    0     0 ..  0    0     1  ..  1     1

The question keeps at most ``max_query_len`` tokens. A passage longer than what is
left of ``max_len`` is cut into *windows*: the first starts at the passage's first
token, each next one ``doc_stride`` tokens further, until one reaches the
passage's end; so consecutive windows overlap and every token is seen with some
context on both sides in one of them.

**Labels.** The answer's characters ``[answer.start, answer.end)`` become tokens
through the passage tokens' character offsets: the first token that ends after
the answer's start, the last one that starts before its end. A window holding
both is labelled with their positions in the window; a window that doesn't, and
every window of an unanswerable question, points both at ``<cls>`` (position 0).
"""
from typing import List, NamedTuple, Optional, Tuple

from .tokenize import tokenize_with_offsets_for

MAX_LEN = 384
DOC_STRIDE = 128
MAX_QUERY_LEN = 64
NO_ANSWER = (0, 0)  # the label of a window without the answer: <cls>, twice


class QAWindow(NamedTuple):
    """One window of one question's passage: model inputs, label and the metadata
    that turns predicted positions back into passage text.

    example_index: the question's index in the list of examples given.
    qas_id: the question's id.
    token_ids, segments: lists of int, ``<cls> question <sep> passage part <sep>``.
    passage_start: the position of the window's first passage token (after the
        question's ``<sep>``); position ``passage_start + k`` is a passage token for
        0 <= k < len(passage_offsets).
    passage_offsets: the (start, end) character offsets in the passage of the
        window's passage tokens.
    label: (start, end) token positions of the answer in the window, ``NO_ANSWER``
        when the window doesn't hold it; None for questions without a known answer.
    """
    example_index: int
    qas_id: str
    token_ids: List[int]
    segments: List[int]
    passage_start: int
    passage_offsets: List[Tuple[int, int]]
    label: Optional[Tuple[int, int]]

    @property
    def valid_len(self):
        return len(self.token_ids)

    def is_passage(self, position):
        """Is the token at this position part of the passage?"""
        return 0 <= position - self.passage_start < len(self.passage_offsets)

    def text_between(self, context, start, end):
        """The passage's own characters from the token at position `start` to the one
        at `end` (both passage positions), as they are written in `context`."""
        first = self.passage_offsets[start - self.passage_start][0]
        last = self.passage_offsets[end - self.passage_start][1]
        return context[first:last]


def window_starts(num_tokens, window_size, doc_stride):
    """The first passage token of each window: 0, doc_stride, 2 doc_stride, ...
    until a window of window_size tokens reaches the passage's end. A stride longer
    than a window would skip tokens: the stride is then the window (as in Google's
    BERT and GluonNLP)."""
    starts = [0]
    while starts[-1] + window_size < num_tokens:
        starts.append(starts[-1] + min(doc_stride, window_size))
    return starts


def answer_token_span(offsets, answer):
    """The first and last passage token (indices into offsets) that overlap the
    answer's characters, or None if none does."""
    covering = [i for i, (start, end) in enumerate(offsets)
                if start < answer.end and end > answer.start]
    return (covering[0], covering[-1]) if covering else None


def make_windows(examples, vocab, max_len=MAX_LEN, doc_stride=DOC_STRIDE,
                 max_query_len=MAX_QUERY_LEN, with_labels=True):
    """The :class:`QAWindow` s of every example, in order (an example's windows
    together).

    Args:
        examples: a list of ``SquadExample`` (for training: ``training_examples()``,
            whose first answer is the target); any iterable, e.g. wrapped in tqdm.
        vocab: a ``WordPieceVocab`` or the book's ``Vocab`` (see :mod:`.tokenize`).
        max_len: the most tokens of a window, specials included.
        doc_stride: how far each window starts after the previous one, in tokens (at
            most a window's passage tokens).
        max_query_len: the most question tokens (the rest is cut off).
        with_labels: label each window (see the module doc); False for questions
            whose answer is not known (labels None).
    Raises:
        ValueError: bad sizes, or with_labels and an answerable example without
            answers or whose first answer covers no passage token.
    """
    if max_query_len < 1 or doc_stride < 1:
        raise ValueError(f'max_query_len ({max_query_len}) and doc_stride ({doc_stride}) '
                         f'must be at least 1')
    if max_len - max_query_len - 3 < 1:  # <cls> question <sep> passage <sep>
        raise ValueError(f'max_len={max_len} leaves no room for the passage after '
                         f'max_query_len={max_query_len} question tokens and 3 specials')
    tokenize = tokenize_with_offsets_for(vocab)
    windows, passages = [], {}  # passage -> (ids, offsets): its questions share it
    for index, example in enumerate(examples):
        question_ids = vocab[tokenize(example.question)[0][:max_query_len]]
        if example.context not in passages:
            tokens, offsets = tokenize(example.context)
            passages[example.context] = vocab[tokens], offsets
        passage_ids, offsets = passages[example.context]
        answer = target_span(example, offsets) if with_labels else None
        window_size = max_len - len(question_ids) - 3
        for first in window_starts(len(passage_ids), window_size, doc_stride):
            last = min(first + window_size, len(passage_ids))
            token_ids = [vocab.cls_id, *question_ids, vocab.sep_id,
                         *passage_ids[first:last], vocab.sep_id]
            passage_start = len(question_ids) + 2
            segments = [0] * passage_start + [1] * (last - first + 1)
            label = None
            if with_labels:
                label = NO_ANSWER
                if answer is not None and first <= answer[0] and answer[1] < last:
                    label = (answer[0] - first + passage_start,
                             answer[1] - first + passage_start)
            windows.append(QAWindow(index, example.qas_id, token_ids, segments,
                                    passage_start, offsets[first:last], label))
    return windows


def target_span(example, offsets):
    """The passage token span of the example's first answer; None if unanswerable."""
    if example.is_impossible:
        return None
    if not example.answers:
        raise ValueError(f'question {example.qas_id!r} is answerable but has no answer '
                         f'to train on')
    span = answer_token_span(offsets, example.answers[0])
    if span is None:
        raise ValueError(f'question {example.qas_id!r}: its answer '
                         f'{example.answers[0].text!r} covers no passage token')
    return span
