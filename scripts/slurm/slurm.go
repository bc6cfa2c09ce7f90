// Package slurm holds the Slurm scripts of a packer build in parts, the files of this folder,
// for `packer cluster slurm` to print or write out: a pip or binary user then has them
// without a checkout. The files here are the only copy; docs/cluster.md describes them.
package slurm

import "embed"

// Files are build-parts.sbatch, merge.sbatch and submit.sh, byte for byte as in this folder.
//
//go:embed build-parts.sbatch merge.sbatch submit.sh
var Files embed.FS
