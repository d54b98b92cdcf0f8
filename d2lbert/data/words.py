"""The book's word-level tokenization, the same in every command: pretraining a word
vocabulary (counting the corpus's words, encoding it), fine-tuning, `encode`,
`predict` and SQuAD's offsets (`squad.tokenize`).

Text is lower-cased; punctuation marks are tokens of their own, as WikiText writes
them ("Paris." -> 'paris', '.'); WikiText's markup stays whole: '<unk>' (its rare
words) and '@-@', '@,@', '@.@' (the hyphens, thousands separators and decimal points it
split off). On WikiText, whose tokens are already separated by spaces, this splits
only the tokens that hold a mark inside ("n't" -> 'n', "'", 't'), as fine-tuning always
has; pretraining used to split at spaces alone, so that continuing a word vocabulary
on ordinary text made "paris." one unknown token.
"""
import re

# WikiText's markup, a run of word characters, or one mark
WORD_TOKEN = re.compile(r'<unk>|@[-,.]@|\w+|[^\w\s]')
# The version of the word tokenization a pretraining run records, so that a --resume
# reads its text into the tokens it trained on: 1 split at spaces alone (pretraining
# before d2lbert 0.2.0), 2 is `word_tokenize`.
WORD_TOKENIZER_VERSION = 2


def word_tokenize(text):
    """The tokens of text, lower-cased (see the module doc).

    >>> word_tokenize("A man's hat, red. The <unk> 1 @,@ 000")
    ['a', 'man', "'", 's', 'hat', ',', 'red', '.', 'the', '<unk>', '1', '@,@', '000']
    """
    return WORD_TOKEN.findall(text.lower())
