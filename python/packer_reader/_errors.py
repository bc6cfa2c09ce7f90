"""Exceptions raised by packer_reader."""


class PackerError(Exception):
    """Base class of every packer_reader error."""


class FormatError(PackerError):
    """A file is malformed: bad magic, unknown version or flag, a length out of bounds,
    a manifest that does not describe the files. ``path`` names the file, ``offset`` the
    byte offset where the problem was found (or None)."""

    def __init__(self, path, reason, offset=None):
        self.path = str(path)
        self.reason = reason
        self.offset = offset
        where = "" if offset is None else " at offset %d" % offset
        super().__init__("%s%s: %s" % (self.path, where, reason))


class CorruptionError(FormatError):
    """Stored bytes do not match their checksum (a flipped bit, a torn write).

    ``path``: the file; ``record_range``: ``(start, stop)``, the half-open range of dataset
    record indices whose bytes are affected (all records of the file when the header, index or
    footer is damaged), or None when unknown; ``offset``: byte offset of the damaged section in
    the file; ``reason``: what did not match."""

    def __init__(self, path, record_range, offset, reason):
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
