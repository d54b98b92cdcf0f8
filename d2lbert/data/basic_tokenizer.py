"""Google BERT's basic tokenization: a text split into words, before WordPiece.

The steps of Google's `tokenization.py`, as Hugging Face's `BertTokenizer` runs them:

1. clean-up: control characters (and U+0000, U+FFFD) dropped, whitespace -> ' ', and
   a space each side of every CJK ideograph (each is a word of its own);
2. composition (NFC): a letter and the accent written after it become one character
   ('e' + U+0301 -> 'é');
3. for the uncased BERTs only: lower case, then the accents stripped (NFD, then the
   non-spacing marks dropped: 'Café' -> 'cafe');
4. a space each side of every punctuation mark, then a split at whitespace.

>>> basic_tokenize("Don't, Café 中国!", lowercase=True)
['don', "'", 't', ',', 'cafe', '中', '国', '!']
>>> basic_tokenize("Don't, Café 中国!", lowercase=False)
['Don', "'", 't', ',', 'Café', '中', '国', '!']

`basic_words` splits the same words and also says which characters of the original
text each word's characters come from (question answering cuts its answers there).
"""
import functools
import unicodedata

# code point ranges of the CJK Unified Ideographs blocks (Hangul and kana are not in them:
# they are written with spaces between words, so they are split like any other script)
CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
              (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def is_whitespace(ch):
    """A space, tab, newline or carriage return, or a Unicode space separator (Zs)."""
    return ch in ' \t\n\r' or unicodedata.category(ch) == 'Zs'


def is_control(ch):
    """A character of Unicode's category "other" (C*: control, format, private use...),
    but tab, newline and carriage return, which count as whitespace."""
    return ch not in '\t\n\r' and unicodedata.category(ch).startswith('C')


@functools.lru_cache(maxsize=1 << 16)  # per character: a text's characters repeat
def is_punctuation(ch):
    """A Unicode punctuation mark (P*), or any ASCII character that is neither a letter,
    a digit, a space nor a control character ('$', '^', '`' are split off too)."""
    return (ch.isascii() and ch.isprintable() and not ch.isalnum() and ch != ' '
            or unicodedata.category(ch).startswith('P'))


def is_cjk(ch):
    """A CJK ideograph ('中'), which BERT takes as a word of its own."""
    return any(first <= ord(ch) <= last for first, last in CJK_RANGES)


@functools.lru_cache(maxsize=1 << 16)
def cleaned(ch):
    """Step 1 for one character: '' (dropped), ' ', ' ch ' (a CJK ideograph) or ch."""
    if ch in '\x00\ufffd' or is_control(ch):
        return ''
    if is_whitespace(ch):
        return ' '
    return f' {ch} ' if is_cjk(ch) else ch


def without_accents(text):
    """text decomposed (NFD) and its non-spacing marks (accents) dropped: 'é' -> 'e'."""
    return ''.join(ch for ch in unicodedata.normalize('NFD', text)
                   if unicodedata.category(ch) != 'Mn')


def spaced(ch):
    """Steps 1 and 4 for one character that steps 2 and 3 leave as it is (ASCII): ''
    (dropped), ' ', ' ch ' (a punctuation mark) or ch."""
    return ''.join(f' {c} ' if is_punctuation(c) else c for c in cleaned(ch))


# steps 1 and 4 on ASCII text, for str.translate: an ASCII text is its own composition
# and lower case without accents, so the steps need no pass per character in Python
ASCII_STEPS = {code: spaced(chr(code)) for code in range(128)}


def basic_tokenize(text, lowercase):
    """The words of text (a list of str), by the steps in this module's docstring."""
    if text.isascii():
        return (text.lower() if lowercase else text).translate(ASCII_STEPS).split()
    text = unicodedata.normalize('NFC', ''.join(map(cleaned, text)))
    if lowercase:
        text = without_accents(text.lower())
    return ''.join(f' {ch} ' if is_punctuation(ch) else ch for ch in text).split()


def aligned_characters(text):
    """The characters of text, each with the span of text it stands for: a list of
    (char, start, end). The steps below keep these spans up to date."""
    return [(ch, i, i + 1) for i, ch in enumerate(text)]


def clean(chars):
    """Step 1, `cleaned`, on aligned characters."""
    return [(c, start, end) for ch, start, end in chars for c in cleaned(ch)]


def compose(chars):
    """Step 2, NFC, on aligned characters: a character and the combining marks after
    it (or the characters it composes with, like Hangul jamo) become one character
    (e + U+0301 -> é) that stands for all of them."""
    units = []
    for ch, start, end in chars:
        if units and (unicodedata.combining(ch) or composes(units[-1][0], ch)):
            units[-1] = (units[-1][0] + ch, units[-1][1], end)
        else:
            units.append((ch, start, end))
    return [(c, start, end) for unit, start, end in units
            for c in unicodedata.normalize('NFC', unit)]


def composes(unit, ch):
    """Does NFC join the character ch with the characters before it?"""
    def nfc_len(text):
        return len(unicodedata.normalize('NFC', text))
    return nfc_len(unit + ch) < nfc_len(unit) + nfc_len(ch)


def lower(chars):
    """Lower case, of the whole text at once (a final 'Σ' -> 'ς'); a character whose
    lower case is longer ('İ' -> 'i' + U+0307) stands for all of it."""
    lowered = iter(''.join(ch for ch, _, _ in chars).lower())
    return [(next(lowered), start, end) for ch, start, end in chars for _ in ch.lower()]


def strip_accents(chars):
    """`without_accents` on aligned characters. The character before a dropped mark
    then stands for the mark too, so 'café' keeps its accent when cut from the
    original text whether the é was written as one character or two."""
    stripped = []
    for ch, start, end in chars:
        for c in unicodedata.normalize('NFD', ch):
            if unicodedata.category(c) != 'Mn':
                stripped.append((c, start, end))
            elif stripped:
                previous, first, _ = stripped[-1]
                stripped[-1] = (previous, first, end)
    return stripped


def basic_words(text, lowercase):
    """The words of `basic_tokenize(text, lowercase)`, with where they come from.

    returns: a list of (word, starts, ends): word a str, and word[k] comes from
    text[starts[k]:ends[k]].

    >>> basic_words('Café!', lowercase=True)
    [('cafe', [0, 1, 2, 3], [1, 2, 3, 4]), ('!', [4], [5])]
    """
    chars = compose(clean(aligned_characters(text)))
    if lowercase:
        chars = strip_accents(lower(chars))
    words, word = [], []
    for char in chars:
        ch = char[0]
        if ch.isspace() or is_punctuation(ch):
            words += [word, [] if ch.isspace() else [char]]
            word = []
        else:
            word.append(char)
    words.append(word)
    return [(''.join(ch for ch, _, _ in word), [start for _, start, _ in word],
             [end for _, _, end in word]) for word in words if word]
