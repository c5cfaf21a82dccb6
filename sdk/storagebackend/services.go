package storagebackend

import (
	"context"
	"encoding/json"

	"github.com/cairn-dev/cairn"
	pb "github.com/cairn-dev/cairn/proto/storagebackendpb"
)

// doc turns wire bytes into a JSON document; empty means "not given".
func doc(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return json.RawMessage(b)
}

// optional turns a document into an optional wire field: nil stays absent.
func optional(d json.RawMessage) []byte {
	if d == nil {
		return nil
	}
	return []byte(d)
}

func owner(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func lockedBy(owner string) *string {
	if owner == "" {
		return nil
	}
	return &owner
}

// common serves the methods both services share.
type common struct{ b ValueBackend }

func (c common) GetValue(ctx context.Context, req *pb.GetValueRequest) (*pb.GetValueResponse, error) {
	v, err := c.b.GetValue(ctx, cairn.GetValueRequest{
		InstanceID:      req.GetTypeInstanceId(),
		ResourceVersion: int(req.GetResourceVersion()),
		Context:         doc(req.GetContext()),
	})
	if err != nil {
		return nil, err
	}
	return &pb.GetValueResponse{Value: optional(v)}, nil
}

func (c common) GetLockedBy(ctx context.Context, req *pb.GetLockedByRequest) (*pb.GetLockedByResponse, error) {
	o, err := c.b.GetLockedBy(ctx, cairn.GetLockedByRequest{InstanceID: req.GetTypeInstanceId(), Context: doc(req.GetContext())})
	if err != nil {
		return nil, err
	}
	return &pb.GetLockedByResponse{LockedBy: lockedBy(o)}, nil
}

func (c common) OnLock(ctx context.Context, req *pb.OnLockRequest) (*pb.OnLockResponse, error) {
	err := c.b.OnLock(ctx, cairn.OnLockRequest{InstanceID: req.GetTypeInstanceId(), Context: doc(req.GetContext()), LockedBy: req.GetLockedBy()})
	if err != nil {
		return nil, err
	}
	return &pb.OnLockResponse{}, nil
}

func (c common) OnUnlock(ctx context.Context, req *pb.OnUnlockRequest) (*pb.OnUnlockResponse, error) {
	err := c.b.OnUnlock(ctx, cairn.OnUnlockRequest{InstanceID: req.GetTypeInstanceId(), Context: doc(req.GetContext())})
	if err != nil {
		return nil, err
	}
	return &pb.OnUnlockResponse{}, nil
}

// valueService serves storage_backend.ValueAndContextStorageBackend.
type valueService struct {
	pb.UnimplementedValueAndContextStorageBackendServer
	b ValueBackend
}

func (s *valueService) GetValue(ctx context.Context, req *pb.GetValueRequest) (*pb.GetValueResponse, error) {
	return common{s.b}.GetValue(ctx, req)
}

func (s *valueService) GetLockedBy(ctx context.Context, req *pb.GetLockedByRequest) (*pb.GetLockedByResponse, error) {
	return common{s.b}.GetLockedBy(ctx, req)
}

func (s *valueService) OnLock(ctx context.Context, req *pb.OnLockRequest) (*pb.OnLockResponse, error) {
	return common{s.b}.OnLock(ctx, req)
}

func (s *valueService) OnUnlock(ctx context.Context, req *pb.OnUnlockRequest) (*pb.OnUnlockResponse, error) {
	return common{s.b}.OnUnlock(ctx, req)
}

func (s *valueService) OnCreate(ctx context.Context, req *pb.OnCreateValueAndContextRequest) (*pb.OnCreateResponse, error) {
	c, err := s.b.OnCreate(ctx, cairn.OnCreateRequest{
		InstanceID: req.GetTypeInstanceId(),
		Value:      doc(req.GetValue()),
		Context:    doc(req.GetContext()),
	})
	if err != nil {
		return nil, err
	}
	return &pb.OnCreateResponse{Context: optional(c)}, nil
}

func (s *valueService) OnUpdate(ctx context.Context, req *pb.OnUpdateValueAndContextRequest) (*pb.OnUpdateResponse, error) {
	c, err := s.b.OnUpdate(ctx, cairn.OnUpdateRequest{
		InstanceID:         req.GetTypeInstanceId(),
		NewResourceVersion: int(req.GetNewResourceVersion()),
		NewValue:           doc(req.GetNewValue()),
		Context:            doc(req.GetContext()),
		OwnerID:            owner(req.OwnerId),
	})
	if err != nil {
		return nil, err
	}
	return &pb.OnUpdateResponse{Context: optional(c)}, nil
}

func (s *valueService) OnDelete(ctx context.Context, req *pb.OnDeleteValueAndContextRequest) (*pb.OnDeleteResponse, error) {
	err := s.b.OnDelete(ctx, cairn.OnDeleteRequest{
		InstanceID: req.GetTypeInstanceId(),
		Context:    doc(req.GetContext()),
		OwnerID:    owner(req.OwnerId),
	})
	if err != nil {
		return nil, err
	}
	return &pb.OnDeleteResponse{}, nil
}

func (s *valueService) OnDeleteRevision(ctx context.Context, req *pb.OnDeleteRevisionValueAndContextRequest) (*pb.OnDeleteRevisionResponse, error) {
	err := s.b.OnDeleteRevision(ctx, cairn.OnDeleteRevisionRequest{
		InstanceID:      req.GetTypeInstanceId(),
		ResourceVersion: int(req.GetResourceVersion()),
		Context:         doc(req.GetContext()),
		OwnerID:         owner(req.OwnerId),
	})
	if err != nil {
		return nil, err
	}
	return &pb.OnDeleteRevisionResponse{}, nil
}

// contextService serves storage_backend.ContextStorageBackend.
type contextService struct {
	pb.UnimplementedContextStorageBackendServer
	b ContextBackend
}

func (s *contextService) GetValue(ctx context.Context, req *pb.GetValueRequest) (*pb.GetValueResponse, error) {
	return common{s.b}.GetValue(ctx, req)
}

func (s *contextService) GetLockedBy(ctx context.Context, req *pb.GetLockedByRequest) (*pb.GetLockedByResponse, error) {
	return common{s.b}.GetLockedBy(ctx, req)
}

func (s *contextService) OnLock(ctx context.Context, req *pb.OnLockRequest) (*pb.OnLockResponse, error) {
	return common{s.b}.OnLock(ctx, req)
}

func (s *contextService) OnUnlock(ctx context.Context, req *pb.OnUnlockRequest) (*pb.OnUnlockResponse, error) {
	return common{s.b}.OnUnlock(ctx, req)
}

func (s *contextService) GetPreCreateValue(ctx context.Context, req *pb.GetPreCreateValueRequest) (*pb.GetPreCreateValueResponse, error) {
	v, err := s.b.GetPreCreateValue(ctx, cairn.GetPreCreateValueRequest{Context: doc(req.GetContext())})
	if err != nil {
		return nil, err
	}
	return &pb.GetPreCreateValueResponse{Value: optional(v)}, nil
}

func (s *contextService) OnCreate(ctx context.Context, req *pb.OnCreateRequest) (*pb.OnCreateResponse, error) {
	c, err := s.b.OnCreate(ctx, cairn.OnCreateRequest{InstanceID: req.GetTypeInstanceId(), Context: doc(req.GetContext())})
	if err != nil {
		return nil, err
	}
	return &pb.OnCreateResponse{Context: optional(c)}, nil
}

func (s *contextService) OnUpdate(ctx context.Context, req *pb.OnUpdateRequest) (*pb.OnUpdateResponse, error) {
	c, err := s.b.OnUpdate(ctx, cairn.OnUpdateRequest{
		InstanceID:         req.GetTypeInstanceId(),
		NewResourceVersion: int(req.GetNewResourceVersion()),
		Context:            doc(req.GetContext()),
		OwnerID:            owner(req.OwnerId),
	})
	if err != nil {
		return nil, err
	}
	return &pb.OnUpdateResponse{Context: optional(c)}, nil
}

func (s *contextService) OnDelete(ctx context.Context, req *pb.OnDeleteRequest) (*pb.OnDeleteResponse, error) {
	err := s.b.OnDelete(ctx, cairn.OnDeleteRequest{
		InstanceID: req.GetTypeInstanceId(),
		Context:    doc(req.GetContext()),
		OwnerID:    owner(req.OwnerId),
	})
	if err != nil {
		return nil, err
	}
	return &pb.OnDeleteResponse{}, nil
}

func (s *contextService) OnDeleteRevision(ctx context.Context, req *pb.OnDeleteRevisionRequest) (*pb.OnDeleteRevisionResponse, error) {
	// The protocol's context-only OnDeleteRevision carries no context.
	err := s.b.OnDeleteRevision(ctx, cairn.OnDeleteRevisionRequest{
		InstanceID:      req.GetTypeInstanceId(),
		ResourceVersion: int(req.GetResourceVersion()),
		OwnerID:         owner(req.OwnerId),
	})
	if err != nil {
		return nil, err
	}
	return &pb.OnDeleteRevisionResponse{}, nil
}
