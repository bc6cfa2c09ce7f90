import os
import subprocess
import sys

PYDIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(*args):
    env = dict(os.environ, PYTHONPATH=PYDIR)
    return subprocess.run([sys.executable, "-m", "packer_reader"] + list(args), capture_output=True, text=True,
                          env=env, cwd=PYDIR)


def test_verify_exit_codes(shards_dir, tmp_path):
    import shutil

    r = run("verify", shards_dir)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "OK" in r.stdout
    d = str(tmp_path / "bad")
    shutil.copytree(shards_dir, d)
    p = os.path.join(d, "shard-00003.pks")
    with open(p, "r+b") as f:
        f.seek(4096 + 100)
        b = f.read(1)
        f.seek(4096 + 100)
        f.write(bytes([b[0] ^ 1]))
    r = run("verify", d)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "shard-00003.pks" in r.stdout and "checksum" in r.stdout and "records 90-96 (shard-00003.pks records 0-6)" in r.stdout
    r = run("verify", d, "--json")
    assert r.returncode == 3
    import json

    rep = json.loads(r.stdout)  # the shape of packer verify --json
    assert rep["ok"] is False and rep["format"] == "shards" and rep["count"] == 203
    cs = [f for f in rep["faults"] if f["kind"] == "checksum"]
    assert cs == [{"file": "shard-00003.pks", "kind": "checksum", "first_record": 90, "records": 7,
                   "shard_first_record": 0, "offset": 4096, "message": cs[0]["message"]}]
    assert {f["kind"] for f in rep["faults"]} == {"checksum", "sha256"}
    assert run("bogus").returncode == 2
    assert run().returncode == 2


def test_verify_extra_file_warning(shards_dir, tmp_path):
    """An unlisted file: a warning naming it and exit 0; with --strict a fault and exit 3."""
    import json
    import shutil

    d = str(tmp_path / "extra")
    shutil.copytree(shards_dir, d)
    with open(os.path.join(d, "notes.txt"), "w") as f:
        f.write("x")
    r = run("verify", d)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "OK" in r.stdout and "warning: extra:" in r.stdout and "notes.txt" in r.stdout
    r = run("verify", d, "--json")
    rep = json.loads(r.stdout)
    assert r.returncode == 0 and rep["ok"] is True and rep["faults"] == []
    assert [(w["file"], w["kind"]) for w in rep["warnings"]] == [("notes.txt", "extra")]
    r = run("verify", d, "--strict")
    assert r.returncode == 3, r.stdout + r.stderr
    assert "extra:" in r.stdout and "notes.txt" in r.stdout


def test_inspect(npy_dir):
    r = run("inspect", npy_dir)
    assert r.returncode == 0 and "203 records" in r.stdout
