// Package storagebackendpb is the generated Go code of the storage backend
// protocol, proto/storage_backend.proto (protobuf package storage_backend).
// Do not edit the *.pb.go files: change the .proto and run
// `go generate ./proto/...`; TestGeneratedCodeIsCurrent fails when they drift.
package storagebackendpb

//go:generate ../gen.sh
