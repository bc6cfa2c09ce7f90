module github.com/packer-dev/packer/shard

go 1.24
