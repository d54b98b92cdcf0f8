"""Which model the fine-tuning commands run: the fast path, or the book's (--plain)."""


def load_fast_path(plain):
    """`d2lbert.fast` (for `run.setup`), or None if plain: the book's model, and a
    --plain run never loads the fast path."""
    if plain:
        return None
    from .. import fast  # only here
    return fast
