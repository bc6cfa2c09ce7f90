// Package webdataset is the source --from webdataset: tar shards in the WebDataset layout, as
// img2dataset writes LAION and DataComp subsets.
//
// # Layout
//
// The source is a folder of shards (every non-hidden file ending in .tar, .tar.gz or .tgz,
// sorted by name; subfolders are not read), one shard file, or a .txt list of shard paths (one
// per line, relative to the list's folder, in the list's order; # starts a comment). A shard is a tar archive whose
// members are grouped into samples by key, as WebDataset defines it: the key of a member is
// its name up to the first dot of its base name ("a/b/000123.jpg" and "a/b/000123.cls" share
// the key "a/b/000123"), and consecutive members with the same key form one sample. Members
// that are not regular files (folders, links) are ignored. Two names of one shard file (a link
// to another shard of the folder, a list naming a shard twice, however spelled) are refused at
// open, naming both: its samples would be packed twice. So is a folder holding a shard and its
// gzip copy (a.tar beside a.tar.gz or a.tgz, as gzip -k or gunzip -k leave them).
//
// A sample's image is its member whose extension (the part of the name after the key's dot) is
// an image type (Extensions, case-insensitive; the first one found), or, with ImageKey
// (--image-key jpg,png), the member with the first of those extensions the sample has. Its
// label is the integer written as text in its .cls member, or, with LabelKey (--label-key),
// the integer field of that name in its .json member. With Options.Classes (--classes) label i is class Classes[i] and a
// label out of range is a bad sample; without, the dataset has no class names and any label
// from 0 up is kept.
//
// # Order, names and provenance
//
// Records are in shard order, then member order: the source order is the archive order. A
// sample is named "SHARD:KEY" in errors and in the manifest's skipped list, and every record
// carries {"shard": SHARD, "key": KEY, "image": MEMBER} as per-record metadata, so a bad
// training sample can be traced back to its tar member.
//
// # Bad input
//
// A sample without an image member, without a .cls member, with a .cls that is not a
// non-negative integer, with a member larger than MaxMemberSize, with two members of one name
// (or whose extensions differ only in case: "a.jpg" twice, "a.cls" then "a.cls" again, "a.jpg"
// and "a.JPG"; tar keeps both, extracting keeps the last, webdataset's own reader raises), with
// more than MaxSampleMembers members, or whose image does not decode is skipped with the reason (or fails the build, --on-error fail). A shard that cannot
// be read to its end (truncated, a damaged header) keeps the samples read before the damage;
// the rest of that shard is one skipped input, "SHARD (after member N)", with the reason, and
// the build goes on with the next shard. A plain tar cut off between two members (its data
// ends where a member header would start, with no end-of-archive blocks: a copy stopped at a
// multiple of 512 bytes) is such a shard too, the sample being read when it ends included, and
// so is an empty file; archive/tar, like Python's tarfile, would read either as complete. Nothing from a tar is ever written to disk, so member
// names cannot place files anywhere.
//
// Images are decoded from the member's bytes by transforms.DecodeBytes, the decoder image
// folders use, so the pixels are the ones Pillow gives for the same bytes.
package webdataset
