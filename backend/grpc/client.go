package grpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	grpclib "google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-dev/cairn"
	pb "github.com/cairn-dev/cairn/proto/storagebackendpb"
)

// Client is the cairn.Backend of one external backend instance, over one
// connection. Exactly one of value and context is set, by acceptValue.
type Client struct {
	o           *Opener
	id          string
	rv          int
	url         string
	target      Target
	acceptValue bool
	// tlsKey is the key of the backend's entry in the TLS configuration
	// (--backend-tls), or the alias or id it would take; clientCert says
	// whether that entry gives a client certificate. Both word hints.
	tlsKey     string
	clientCert bool
	conn       *grpclib.ClientConn
	value      pb.ValueAndContextStorageBackendClient
	context    pb.ContextStorageBackendClient
}

var _ cairn.Backend = (*Client)(nil)

func (c *Client) close() error { return c.conn.Close() }

// serviceName is the gRPC service this backend is called through.
func (c *Client) serviceName() string {
	if c.acceptValue {
		return pb.ValueAndContextStorageBackend_ServiceDesc.ServiceName
	}
	return pb.ContextStorageBackend_ServiceDesc.ServiceName
}

// call runs fn with a deadline, retrying while the backend is Unavailable
// when the call is an idempotent read, and turns a failure into a cairn
// error naming the backend, the operation and the instance.
func (c *Client) call(ctx context.Context, method, what string, instanceID string, read bool, fn func(ctx context.Context) error) error {
	attempts := 1
	if read {
		attempts = c.o.readAttempts
	}
	backoff := c.o.backoff
	var err error
	for attempt := 1; ; attempt++ {
		start := time.Now()
		cctx, cancel := context.WithTimeout(ctx, c.o.timeout)
		err = fn(cctx)
		cancel()
		c.o.log.DebugContext(ctx, "backend call", "backend", c.id, "method", method, "instance", instanceID,
			"attempt", attempt, "duration", time.Since(start).String(), "code", status.Code(err).String())
		if err == nil {
			return nil
		}
		if status.Code(err) != codes.Unavailable || attempt >= attempts || ctx.Err() != nil {
			break
		}
		c.o.log.WarnContext(ctx, "backend unavailable; retrying the read", "backend", c.id, "method", method,
			"instance", instanceID, "attempt", attempt, "backoff", backoff.String(), "err", cairn.BoundText(status.Convert(err).Message(), MaxErrorText))
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		backoff *= 2
	}
	full := "/" + c.serviceName() + "/" + method
	cause := err
	switch status.Code(err) {
	case codes.DeadlineExceeded, codes.Unavailable, codes.Canceled:
		// The backend may have done what was asked before the answer was
		// lost.
		cause = errors.Join(err, cairn.ErrNoAnswer)
	}
	e := backendErr(c.id, codeOf(status.Code(err)), fmt.Sprintf("%s: %s", what, c.describe(full, err)), cause)
	if instanceID != "" {
		e.IDs = []string{instanceID}
	}
	return e
}

// optional sends a document as an optional field: nil stays absent.
func optional(d json.RawMessage) []byte {
	if d == nil {
		return nil
	}
	return []byte(d)
}

// doc reads wire bytes as a document; empty means none. A backend's answer
// is checked here, once, so bytes that are not JSON never reach the hub (and
// from it a REST or GraphQL encoder). The error leaves the bytes out: they
// may be a secret.
func (c *Client) doc(what, field, instanceID string, b []byte) (json.RawMessage, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var syn *json.SyntaxError
	if err := json.Unmarshal(b, new(json.RawMessage)); err != nil {
		msg := fmt.Sprintf("%s: the backend answered with a %s that is not JSON (%d bytes)", what, field, len(b))
		if errors.As(err, &syn) {
			msg += fmt.Sprintf(": syntax error at byte %d", syn.Offset)
		}
		e := backendErr(c.id, cairn.CodeInternal, msg, nil)
		if instanceID != "" {
			e.IDs = []string{instanceID}
		}
		return nil, e
	}
	return json.RawMessage(b), nil
}

func ownerPtr(owner string) *string {
	if owner == "" {
		return nil
	}
	return &owner
}

func revision(rv int) (uint32, error) {
	if rv < 0 || int64(rv) > int64(^uint32(0)) {
		return 0, fmt.Errorf("resource version %d does not fit the protocol's uint32", rv)
	}
	return uint32(rv), nil
}

func (c *Client) badRevision(what, instanceID string, err error) error {
	e := backendErr(c.id, cairn.CodeInvalid, fmt.Sprintf("%s: %v", what, err), err)
	e.IDs = []string{instanceID}
	return e
}

// GetPreCreateValue asks a context-only backend for the value a context
// describes. A backend that accepts values has no such call: nil.
func (c *Client) GetPreCreateValue(ctx context.Context, req cairn.GetPreCreateValueRequest) (json.RawMessage, error) {
	if c.acceptValue {
		return nil, nil
	}
	var raw []byte
	what := "get the pre-create value"
	err := c.call(ctx, "GetPreCreateValue", what, "", true, func(ctx context.Context) error {
		resp, err := c.context.GetPreCreateValue(ctx, &pb.GetPreCreateValueRequest{Context: req.Context})
		if err == nil {
			raw = resp.Value
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return c.doc(what, "value", "", raw)
}

// OnCreate stores resource version 1.
func (c *Client) OnCreate(ctx context.Context, req cairn.OnCreateRequest) (json.RawMessage, error) {
	var raw []byte
	what := fmt.Sprintf("create TypeInstance %q", req.InstanceID)
	err := c.call(ctx, "OnCreate", what, req.InstanceID, false, func(ctx context.Context) error {
		var resp *pb.OnCreateResponse
		var err error
		if c.acceptValue {
			resp, err = c.value.OnCreate(ctx, &pb.OnCreateValueAndContextRequest{
				TypeInstanceId: req.InstanceID, Value: req.Value, Context: optional(req.Context),
			})
		} else {
			resp, err = c.context.OnCreate(ctx, &pb.OnCreateRequest{TypeInstanceId: req.InstanceID, Context: req.Context})
		}
		if err == nil {
			raw = resp.Context
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return c.doc(what, "context", req.InstanceID, raw)
}

// OnUpdate stores a new resource version.
func (c *Client) OnUpdate(ctx context.Context, req cairn.OnUpdateRequest) (json.RawMessage, error) {
	what := fmt.Sprintf("update TypeInstance %q to resource version %d", req.InstanceID, req.NewResourceVersion)
	rv, err := revision(req.NewResourceVersion)
	if err != nil {
		return nil, c.badRevision(what, req.InstanceID, err)
	}
	var raw []byte
	err = c.call(ctx, "OnUpdate", what, req.InstanceID, false, func(ctx context.Context) error {
		var resp *pb.OnUpdateResponse
		var err error
		if c.acceptValue {
			resp, err = c.value.OnUpdate(ctx, &pb.OnUpdateValueAndContextRequest{
				TypeInstanceId: req.InstanceID, NewResourceVersion: rv, NewValue: req.NewValue,
				Context: optional(req.Context), OwnerId: ownerPtr(req.OwnerID),
			})
		} else {
			resp, err = c.context.OnUpdate(ctx, &pb.OnUpdateRequest{
				TypeInstanceId: req.InstanceID, NewResourceVersion: rv, Context: req.Context, OwnerId: ownerPtr(req.OwnerID),
			})
		}
		if err == nil {
			raw = resp.Context
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return c.doc(what, "context", req.InstanceID, raw)
}

// OnDelete removes every resource version of an instance.
func (c *Client) OnDelete(ctx context.Context, req cairn.OnDeleteRequest) error {
	what := fmt.Sprintf("delete TypeInstance %q", req.InstanceID)
	return c.call(ctx, "OnDelete", what, req.InstanceID, false, func(ctx context.Context) error {
		var err error
		if c.acceptValue {
			_, err = c.value.OnDelete(ctx, &pb.OnDeleteValueAndContextRequest{
				TypeInstanceId: req.InstanceID, Context: optional(req.Context), OwnerId: ownerPtr(req.OwnerID),
			})
		} else {
			_, err = c.context.OnDelete(ctx, &pb.OnDeleteRequest{
				TypeInstanceId: req.InstanceID, Context: req.Context, OwnerId: ownerPtr(req.OwnerID),
			})
		}
		return err
	})
}

// OnDeleteRevision removes one resource version. The context-only service
// carries no context in this call.
func (c *Client) OnDeleteRevision(ctx context.Context, req cairn.OnDeleteRevisionRequest) error {
	what := fmt.Sprintf("delete resource version %d of TypeInstance %q", req.ResourceVersion, req.InstanceID)
	rv, err := revision(req.ResourceVersion)
	if err != nil {
		return c.badRevision(what, req.InstanceID, err)
	}
	return c.call(ctx, "OnDeleteRevision", what, req.InstanceID, false, func(ctx context.Context) error {
		var err error
		if c.acceptValue {
			_, err = c.value.OnDeleteRevision(ctx, &pb.OnDeleteRevisionValueAndContextRequest{
				TypeInstanceId: req.InstanceID, ResourceVersion: rv, Context: optional(req.Context), OwnerId: ownerPtr(req.OwnerID),
			})
		} else {
			_, err = c.context.OnDeleteRevision(ctx, &pb.OnDeleteRevisionRequest{
				TypeInstanceId: req.InstanceID, ResourceVersion: rv, OwnerId: ownerPtr(req.OwnerID),
			})
		}
		return err
	})
}

// GetValue reads one resource version's value.
func (c *Client) GetValue(ctx context.Context, req cairn.GetValueRequest) (json.RawMessage, error) {
	what := fmt.Sprintf("get resource version %d of TypeInstance %q", req.ResourceVersion, req.InstanceID)
	rv, err := revision(req.ResourceVersion)
	if err != nil {
		return nil, c.badRevision(what, req.InstanceID, err)
	}
	var raw []byte
	err = c.call(ctx, "GetValue", what, req.InstanceID, true, func(ctx context.Context) error {
		in := &pb.GetValueRequest{TypeInstanceId: req.InstanceID, ResourceVersion: rv, Context: req.Context}
		var resp *pb.GetValueResponse
		var err error
		if c.acceptValue {
			resp, err = c.value.GetValue(ctx, in)
		} else {
			resp, err = c.context.GetValue(ctx, in)
		}
		if err == nil {
			raw = resp.Value
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return c.doc(what, "value", req.InstanceID, raw)
}

// GetLockedBy reads the lock owner, "" when unlocked.
func (c *Client) GetLockedBy(ctx context.Context, req cairn.GetLockedByRequest) (string, error) {
	var out string
	what := fmt.Sprintf("get the lock of TypeInstance %q", req.InstanceID)
	err := c.call(ctx, "GetLockedBy", what, req.InstanceID, true, func(ctx context.Context) error {
		in := &pb.GetLockedByRequest{TypeInstanceId: req.InstanceID, Context: req.Context}
		var resp *pb.GetLockedByResponse
		var err error
		if c.acceptValue {
			resp, err = c.value.GetLockedBy(ctx, in)
		} else {
			resp, err = c.context.GetLockedBy(ctx, in)
		}
		if err == nil {
			out = resp.GetLockedBy()
		}
		return err
	})
	return out, err
}

// OnLock records the lock owner.
func (c *Client) OnLock(ctx context.Context, req cairn.OnLockRequest) error {
	what := fmt.Sprintf("lock TypeInstance %q for %q", req.InstanceID, req.LockedBy)
	return c.call(ctx, "OnLock", what, req.InstanceID, false, func(ctx context.Context) error {
		in := &pb.OnLockRequest{TypeInstanceId: req.InstanceID, Context: req.Context, LockedBy: req.LockedBy}
		var err error
		if c.acceptValue {
			_, err = c.value.OnLock(ctx, in)
		} else {
			_, err = c.context.OnLock(ctx, in)
		}
		return err
	})
}

// OnUnlock clears the lock.
func (c *Client) OnUnlock(ctx context.Context, req cairn.OnUnlockRequest) error {
	what := fmt.Sprintf("unlock TypeInstance %q", req.InstanceID)
	return c.call(ctx, "OnUnlock", what, req.InstanceID, false, func(ctx context.Context) error {
		in := &pb.OnUnlockRequest{TypeInstanceId: req.InstanceID, Context: req.Context}
		var err error
		if c.acceptValue {
			_, err = c.value.OnUnlock(ctx, in)
		} else {
			_, err = c.context.OnUnlock(ctx, in)
		}
		return err
	})
}
