"""The wheel's `packer` console command (packer_reader._launcher): execs the bundled binary, and
says what to install when a copy of the package carries none."""

import os
import stat
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.join(os.path.dirname(HERE), "packer_reader")


def _run(pkg_parent, *args):
    code = "import sys; from packer_reader._launcher import main; sys.exit(main())"
    return subprocess.run([sys.executable, "-c", code] + list(args), cwd=pkg_parent, capture_output=True,
                          text=True, env=dict(os.environ, PYTHONPATH=pkg_parent))


def test_without_binary_names_what_to_install(tmp_path):
    os.symlink(PKG, str(tmp_path / "packer_reader"))
    assert not os.path.exists(os.path.join(PKG, "_bin", "packer")), "a binary in the source tree"
    r = _run(str(tmp_path), "--version")
    assert r.returncode == 127 and "go install github.com/packer-dev/packer/cmd/packer" in r.stderr


def test_execs_the_bundled_binary_with_the_arguments(tmp_path):
    pkg = tmp_path / "packer_reader"
    pkg.mkdir()
    for name in os.listdir(PKG):
        if name.endswith(".py"):
            (pkg / name).write_bytes(open(os.path.join(PKG, name), "rb").read())
    (pkg / "_bin").mkdir()
    fake = pkg / "_bin" / "packer"  # a stand-in binary: prints its argv and exits 3
    fake.write_text("#!/bin/sh\necho \"$0|$*\"\nexit 3\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    r = _run(str(tmp_path), "build", "a b", "-o", "out")
    assert r.returncode == 3 and r.stdout.strip().endswith("|build a b -o out"), r
