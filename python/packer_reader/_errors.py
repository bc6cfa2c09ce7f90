"""Exceptions raised by packer_reader."""


class PackerError(Exception):
    """Base class of every packer_reader error."""


class FormatError(PackerError):
    """A file is malformed: bad magic, unknown version or flag, a length out of bounds,
    a manifest that does not describe the files. ``path`` names the file, ``offset`` the
    byte offset where the problem was found (or None).

    ``FormatError(message)`` with one argument is accepted too (torch's DataLoader re-raises a
    worker's exception that way); ``path`` is then None."""

    def __init__(self, path, reason=None, offset=None):
        if reason is None and offset is None:
            self.path, self.reason, self.offset = None, str(path), None
            Exception.__init__(self, str(path))
            return
        self.path = str(path)
        self.reason = reason
        self.offset = offset
        where = "" if offset is None else " at offset %d" % offset
        Exception.__init__(self, "%s%s: %s" % (self.path, where, reason))

    def __reduce__(self):
        return (_restore, (self.__class__, self.__dict__.copy(), str(self)))


class CorruptionError(FormatError):
    """Stored bytes do not match their checksum (a flipped bit, a torn write).

    ``path``: the file; ``record_range``: ``(start, stop)``, the half-open range of dataset
    record indices whose bytes are affected (all records of the file when the header or index is
    damaged), or None when unknown; ``offset``: byte offset of the damaged section in the file;
    ``reason``: what did not match. ``str(e)`` names all of them."""

    def __init__(self, path, record_range=None, offset=None, reason=None):
        if record_range is None and offset is None and reason is None:
            self.path, self.record_range, self.offset, self.reason = None, None, None, str(path)
            Exception.__init__(self, str(path))
            return
        self.path = str(path)
        self.record_range = None if record_range is None else (int(record_range[0]), int(record_range[1]))
        self.offset = offset
        self.reason = reason
        rr = ""
        if self.record_range is not None:
            a, b = self.record_range
            rr = " records %d..%d" % (a, b - 1) if b - a != 1 else " record %d" % a
        where = "" if offset is None else " (offset %d)" % offset
        Exception.__init__(self, "%s:%s%s: %s" % (self.path, rr, where, reason))


def _restore(cls, state, message):
    e = cls.__new__(cls)
    Exception.__init__(e, message)
    e.__dict__.update(state)
    return e
