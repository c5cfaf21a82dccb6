// Package controller defines how a Git storage backend decides where and
// how resources live in a repository tree (seed 003, cup's controllers):
// the template controller (path templates, one JSON or YAML file per
// resource) and WASM controllers (a WASI module speaking cup's process
// protocol) both implement Controller, so the Git backend does not care
// which one a Type is bound to.
package controller

import (
	"context"
	"encoding/json"
)

// Controller reads and writes resources in a repository work tree.
//
// Root is a directory holding the tree at one commit. Get and List only
// read it; Put and Delete change files under it, and the Git backend turns
// those changes into a commit. Resources are cup/Kubernetes-style JSON
// objects: {apiVersion, kind, metadata{namespace, name, labels}, spec}.
// A resource that does not exist is reported with cairn.CodeNotFound.
type Controller interface {
	Get(ctx context.Context, root string, kind Kind, namespace, name string) (json.RawMessage, error)
	// List returns the resources of kind in namespace ("" for all) whose
	// labels include every pair of labels.
	List(ctx context.Context, root string, kind Kind, namespace string, labels map[string]string) ([]json.RawMessage, error)
	// Put creates or replaces the resource (its identity is in its metadata).
	Put(ctx context.Context, root string, kind Kind, resource json.RawMessage) error
	Delete(ctx context.Context, root string, kind Kind, namespace, name string) error
}

// Kind identifies a resource type as cup does: group, version and kind.
type Kind struct {
	Group   string
	Version string
	Kind    string
}
