"""IOB tags: marking entities (chunks of words) one word at a time.

Every word gets ``O`` (outside any entity) or ``B-X`` / ``I-X``: inside an
entity of type X (PER, ORG, LOC, MISC in CoNLL-2003). Two schemes are in use:

* **IOB2** (also called BIO): every entity starts with ``B-X``; its other
  words are ``I-X``. Hugging Face's ``conll2003`` and most models use it.
* **IOB1**, the original CoNLL-2003 files: an entity starts with ``I-X``;
  ``B-X`` appears only to separate two adjacent entities of the same type.

    words  Peter  Blackburn  met  EU     Commission  officials
    IOB1   I-PER  I-PER      O    I-ORG  I-ORG       O
    IOB2   B-PER  I-PER      O    B-ORG  I-ORG       O

In both schemes an ``I-X`` that follows ``O`` or a tag of another type
starts an entity; so :func:`iob1_to_iob2` only has to write ``B-`` there.
"""


def split_tag(tag):
    """'B-PER' -> ('B', 'PER'), 'O' -> ('O', ''); ValueError for other tags."""
    prefix, _, entity_type = tag.partition('-')
    if tag == 'O' or (prefix in ('B', 'I') and entity_type):
        return prefix, entity_type
    raise ValueError(f'{tag!r} is not an IOB tag (O, B-type or I-type)')


def iob1_to_iob2(tags):
    """The IOB2 (BIO) tags of a sentence tagged in IOB1 (a list of str).

    >>> iob1_to_iob2(['I-PER', 'I-PER', 'O', 'I-LOC', 'B-LOC', 'I-ORG'])
    ['B-PER', 'I-PER', 'O', 'B-LOC', 'B-LOC', 'B-ORG']

    IOB2 input comes back unchanged.
    """
    converted = []
    previous_type = ''  # '' for O and before the first word
    for tag in tags:
        prefix, entity_type = split_tag(tag)
        if prefix == 'I' and entity_type != previous_type:
            tag = 'B-' + entity_type
        converted.append(tag)
        previous_type = entity_type
    return converted
