package grpc

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cairn-dev/cairn"
)

// CapactE2EMockURL is the url of the storage backend Capact's end-to-end
// tests register (test/e2e/action_test.go) where nothing is deployed.
// Capact's Local Hub never dials it: it skips every call to such a backend
// and reads its values as {"key": "<backend id>"} (hub-js
// local/storage/service.ts, FAKE_TEST_URL). Under Config.CapactURLs the
// Opener does the same, so those tests run against cairn.
const CapactE2EMockURL = "e2e-test-backend-mock-url:50051"

// capactMock is the backend behind CapactE2EMockURL: it keeps nothing.
type capactMock struct{ id string }

func (m capactMock) GetPreCreateValue(context.Context, cairn.GetPreCreateValueRequest) (json.RawMessage, error) {
	return nil, nil
}

func (m capactMock) OnCreate(context.Context, cairn.OnCreateRequest) (json.RawMessage, error) {
	return nil, nil
}

func (m capactMock) OnUpdate(context.Context, cairn.OnUpdateRequest) (json.RawMessage, error) {
	return nil, nil
}

func (m capactMock) OnDelete(context.Context, cairn.OnDeleteRequest) error { return nil }

func (m capactMock) OnDeleteRevision(context.Context, cairn.OnDeleteRevisionRequest) error {
	return nil
}

// GetValue answers what Local Hub answers for every resource version.
func (m capactMock) GetValue(context.Context, cairn.GetValueRequest) (json.RawMessage, error) {
	v, err := json.Marshal(map[string]string{"key": m.id})
	if err != nil {
		return nil, fmt.Errorf("capact e2e mock backend %q: %w", m.id, err)
	}
	return v, nil
}

func (m capactMock) GetLockedBy(context.Context, cairn.GetLockedByRequest) (string, error) {
	return "", nil
}

func (m capactMock) OnLock(context.Context, cairn.OnLockRequest) error { return nil }

func (m capactMock) OnUnlock(context.Context, cairn.OnUnlockRequest) error { return nil }
