// Package client is the one client interface of the hub that the CLI (and
// any other client of the hub: controllers, tools) is written against, and
// its two implementations:
//
//   - in process: *hub.Hub itself satisfies Interface; NewLocal serves the
//     REST façade over it in process, for Interface and the resources;
//   - over the network: NewREST implements Interface with the REST API of a
//     cairn server (api/rest/client underneath).
//
// A command written against Client behaves the same in both: local mode and
// server mode differ only in which Client it gets.
package client

import (
	"context"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest"
	restclient "github.com/cairn-dev/cairn/api/rest/client"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/policy"
	"github.com/cairn-dev/cairn/store"
)

// Interface is what a client does with the hub: Types, instances with
// their history, locks, storage backends and the policy. The method set is
// the hub's own, so *hub.Hub is the in-process implementation.
type Interface interface {
	ListTypes(ctx context.Context, f store.TypeFilter) ([]cairn.Type, error)
	GetType(ctx context.Context, ref cairn.TypeRef) (cairn.Type, error)
	// ApplyType creates the Type, or leaves an identical one; it reports
	// whether it created it.
	ApplyType(ctx context.Context, t cairn.Type) (cairn.Type, bool, error)
	DeleteType(ctx context.Context, ref cairn.TypeRef) error

	GetInstance(ctx context.Context, id string, withValue bool) (cairn.Instance, error)
	GetInstanceByName(ctx context.Context, typePath, namespace, name string, withValue bool) (cairn.Instance, error)
	ListInstances(ctx context.Context, f store.InstanceFilter, withValues bool) ([]cairn.Instance, error)
	// ResourceVersions is an instance's history, oldest first.
	ResourceVersions(ctx context.Context, id string, withValues bool) ([]cairn.ResourceVersion, error)
	CreateInstances(ctx context.Context, req hub.CreateRequest) ([]hub.Created, error)
	UpdateInstances(ctx context.Context, ups []hub.UpdateInstance) ([]cairn.Instance, error)
	DeleteInstance(ctx context.Context, id, ownerID string) error
	LockInstances(ctx context.Context, ids []string, owner string) error
	UnlockInstances(ctx context.Context, ids []string, owner string) error

	StorageBackend(ctx context.Context, id string) (cairn.StorageBackend, error)
	CheckBackend(ctx context.Context, id string) (cairn.StorageBackend, cairn.BackendHealth, error)
	// RotateBackendKeys re-encrypts a SOPS Git backend's files to new age
	// recipients in one commit.
	RotateBackendKeys(ctx context.Context, id string, r hub.KeyRotation) (hub.KeyRotationResult, error)

	GetPolicy(ctx context.Context) (hub.PolicyDocument, error)
	ApplyPolicy(ctx context.Context, p policy.Policy) (hub.PolicyDocument, error)
	ExplainPolicy(ctx context.Context, path, revision string) (hub.PolicyExplanation, error)
}

var _ Interface = (*hub.Hub)(nil)

// Client is what a command gets: the hub operations (Interface) and the
// REST resources (discovery, objects of every served resource, watches),
// which is how the resource commands (get, apply, edit, ...) see user
// Types in Kubernetes form.
type Client struct {
	Interface
	*restclient.Client
}

// NewLocal is the in-process Client over h: the REST façade over h
// served in process, for the hub's operations (Interface, through NewREST)
// as for the resources. A command's answers and refusals are so the same,
// word for word, as a server's ("TypeInstance "ID" is invalid: ..."),
// where calling h directly gave the hub's own wording, Capact's ("failed
// to update TypeInstances: ..."), in local mode only.
func NewLocal(h *hub.Hub, opts ...restclient.Option) Client {
	c := restclient.NewInProcess(rest.New(rest.Config{Hub: h}), opts...)
	return Client{Interface: NewREST(c), Client: c}
}

// NewRemote is the Client of the server c talks to.
func NewRemote(c *restclient.Client) Client {
	return Client{Interface: NewREST(c), Client: c}
}
