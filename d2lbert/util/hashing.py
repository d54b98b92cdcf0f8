"""SHA-1 digests of files (downloads, checkpoints) and of values (cache keys)."""
import hashlib


def sha1_of_file(path, block_size=1 << 20):
    """Hex SHA-1 of a file, read in 1 MB blocks."""
    sha1 = hashlib.sha1()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(block_size), b''):
            sha1.update(block)
    return sha1.hexdigest()


def sha1_of_strings(*parts):
    """Hex SHA-1 of the given values' ``repr``, for cache keys."""
    return hashlib.sha1(repr(parts).encode('utf-8')).hexdigest()
