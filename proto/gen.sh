#!/usr/bin/env bash
# Generates the Go code of storage_backend.proto into storagebackendpb/ (or
# into the directory given as $1, which the drift test uses to compare).
#
# Needs protoc (Debian: apt-get install protobuf-compiler). The two plugins
# are built at the pinned versions below; keep PROTOC_GEN_GO in step with
# google.golang.org/protobuf in go.mod, as generated code must match the
# runtime library it runs against.
set -euo pipefail

PROTOC_GEN_GO=google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
PROTOC_GEN_GO_GRPC=google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2

here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/storagebackendpb}"
mkdir -p "$out"

if ! command -v protoc >/dev/null; then
	echo "gen.sh: protoc not found; install it with: apt-get install -y protobuf-compiler" >&2
	exit 1
fi

bin="$(mktemp -d)"
trap 'rm -rf "$bin"' EXIT
GOBIN="$bin" go install "$PROTOC_GEN_GO"
GOBIN="$bin" go install "$PROTOC_GEN_GO_GRPC"

protoc -I "$here" \
	--plugin=protoc-gen-go="$bin/protoc-gen-go" \
	--plugin=protoc-gen-go-grpc="$bin/protoc-gen-go-grpc" \
	--go_out="$out" --go_opt=paths=source_relative \
	--go-grpc_out="$out" --go-grpc_opt=paths=source_relative \
	"$here/storage_backend.proto"
