// Package k8s holds the Kubernetes manifest templates of a packer build in parts, the files of
// this folder, for `packer cluster k8s` to render as render.sh does: a pip or binary user then
// has them without a checkout. The files here are the only copy; docs/cluster.md describes them.
package k8s

import "embed"

// Templates are output-pvc.yaml, plan-job.yaml, parts-job.yaml and merge-job.yaml, byte for byte as in this
// folder, with render.sh's @NAME@ placeholders.
//
//go:embed output-pvc.yaml plan-job.yaml parts-job.yaml merge-job.yaml
var Templates embed.FS
