// Package shard reads and writes packer shard files and dataset manifests.
//
// # Format
//
// The bytes of a shard are specified in FORMAT.md, beside this file; the constants in format.go
// are checked against it by the tests.
//
// This package uses the standard library only, so trainers can embed it without cgo.
package shard
