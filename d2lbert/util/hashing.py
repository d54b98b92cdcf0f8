"""SHA-1 digests of files (downloads, checkpoints) and of values (cache keys)."""
import hashlib
import os

# (real path, size, modification time in ns, inode) -> SHA-1 of the files hashed so far
REMEMBERED_SHA1S = {}


def sha1_of_file(path, block_size=1 << 20):
    """Hex SHA-1 of a file, read in 1 MB blocks."""
    sha1 = hashlib.sha1()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(block_size), b''):
            sha1.update(block)
    return sha1.hexdigest()


def remembered_sha1_of_file(path):
    """`sha1_of_file`, read once per process: a file hashed before and unchanged since
    (the same size, modification time and inode) is not read again. For a corpus that
    several steps of one start identify (its cache key, the run's record of its text);
    a check for corruption, which must read the bytes, uses `sha1_of_file`."""
    stat = os.stat(path)
    key = (os.path.realpath(path), stat.st_size, stat.st_mtime_ns, stat.st_ino)
    if key not in REMEMBERED_SHA1S:
        REMEMBERED_SHA1S[key] = sha1_of_file(path)
    return REMEMBERED_SHA1S[key]


def sha1_of_strings(*parts):
    """Hex SHA-1 of the given values' ``repr``, for cache keys."""
    return hashlib.sha1(repr(parts).encode('utf-8')).hexdigest()
