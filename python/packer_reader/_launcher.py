"""The ``packer`` console command of the wheel: runs the packer binary bundled in the package
(``packer_reader/_bin/packer``, put there by scripts/build-wheel.sh) in place of this process,
with the same arguments, so exit status, signals and terminal handling are the binary's own."""

import os
import sys


def binary_path():
    """Path of the bundled packer binary, or None when this copy of the package has none (a
    source checkout, or an install from ./python instead of the wheel)."""
    p = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bin", "packer")
    return p if os.path.isfile(p) else None


def main():
    path = binary_path()
    if path is None:
        sys.stderr.write("packer: this packer_reader install carries no packer binary (only the wheel built by "
                         "scripts/build-wheel.sh does); install that wheel, or the command with "
                         "`go install github.com/packer-dev/packer/cmd/packer@latest` (docs/install.md)\n")
        return 127
    try:
        os.execv(path, ["packer"] + sys.argv[1:])
    except OSError as e:
        sys.stderr.write("packer: cannot run %s: %s\n" % (path, e))
        return 126


if __name__ == "__main__":
    sys.exit(main())
