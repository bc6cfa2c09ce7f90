"""python3 -m packer_reader verify DIR [--json] [--strict]   |   python3 -m packer_reader inspect DIR
(DIR: a packer output directory, or s3://bucket/prefix)

Exit status: 0 success, 2 usage error, 3 corrupt or mismatching data, 1 other failure."""

import argparse
import json
import os
import sys

EXIT_OK = 0
EXIT_FAIL = 1
EXIT_USAGE = 2
EXIT_CORRUPT = 3


def _describe_order(manifest):
    """The order the records were written in: source order, or packer build --shuffle's
    permutation with its seed (the manifest's source.shuffle)."""
    sh = (manifest.get("source") or {}).get("shuffle")
    if sh is None:
        return "source order"
    seed = sh.get("seed") if isinstance(sh, dict) else None
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**64 or len(sh) != 1:
        return "unknown (source.shuffle is %s, not {\"seed\": S})" % json.dumps(sh)
    return "shuffled at build time (--shuffle --seed %d)" % seed


def main(argv=None):
    import packer_reader

    ap = argparse.ArgumentParser(prog="python3 -m packer_reader", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd")
    v = sub.add_parser("verify", help="check every file of a packer output directory against its manifest")
    v.add_argument("dir")
    v.add_argument("--json", action="store_true", help="print the report as JSON")
    v.add_argument("--strict", action="store_true",
                   help="fail on files the manifest does not list (by default a warning)")
    i = sub.add_parser("inspect", help="print a short summary of a dataset")
    i.add_argument("dir")
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return EXIT_USAGE if e.code else EXIT_OK
    if args.cmd is None:
        ap.print_usage(sys.stderr)
        return EXIT_USAGE
    if args.cmd == "verify":
        try:
            rep = packer_reader.verify(args.dir, strict=args.strict)
        except packer_reader.PackerError as e:  # an s3:// location that cannot be read (access, network)
            print("error: %s" % e, file=sys.stderr)
            return EXIT_FAIL
        print(json.dumps(rep.to_dict(), indent=2) if args.json else str(rep))
        return EXIT_OK if rep.ok else EXIT_CORRUPT
    try:
        with packer_reader.open(args.dir) as ds:
            print(repr(ds))
            print("classes: %d %s" % (len(ds.classes), ds.classes[:10]))
            print("sample: %s" % json.dumps(ds.sample_spec))
            if ds.aux_names:
                print("aux: %s" % ds.aux_names)
            for f in ds.fields:  # format version 3: one line per field
                print("field %s: %s" % (f["name"], json.dumps({k: v for k, v in f.items() if k != "name"},
                                                               sort_keys=True)))
            print("order: %s" % _describe_order(ds.manifest))
    except packer_reader.FormatError as e:
        print("error: %s" % e, file=sys.stderr)
        return EXIT_CORRUPT
    except packer_reader.PackerError as e:
        print("error: %s" % e, file=sys.stderr)
        return EXIT_FAIL
    return EXIT_OK


if __name__ == "__main__":
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:  # output piped into head and the like
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = EXIT_FAIL
    sys.exit(code)
