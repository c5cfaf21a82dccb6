package capactcompat_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/cairn-dev/cairn"
)

// dotenv is a storage backend in the style of Capact's secret storage
// backend with its dotenv provider: each resource version of a value is a
// file <dir>/<instance>/<version>.env holding `value=<JSON>`, the lock a
// file <dir>/<instance>/lock. It records the calls it gets, and refuses an
// update whose value holds "refuse": true, so a test can make the hub roll
// an update back.
type dotenv struct {
	dir string

	mu    sync.Mutex
	calls []string // "<Method> <instance> [<version>]"
}

var errRefuse = cairn.Errorf(cairn.CodeInvalid, "value refused on request")

func (d *dotenv) record(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, fmt.Sprintf(format, args...))
}

func (d *dotenv) called(call string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.calls {
		if c == call {
			return true
		}
	}
	return false
}

func (d *dotenv) file(id string, rv int) string {
	return filepath.Join(d.dir, id, strconv.Itoa(rv)+".env")
}

func (d *dotenv) write(id string, rv int, value json.RawMessage) error {
	if err := os.MkdirAll(filepath.Join(d.dir, id), 0o700); err != nil {
		return err
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, value); err != nil {
		return cairn.Errorf(cairn.CodeInvalid, "value is not JSON: %w", err)
	}
	return os.WriteFile(d.file(id, rv), []byte("value="+compact.String()+"\n"), 0o600)
}

// log returns the calls so far.
func (d *dotenv) log() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.calls...)
}

// versions lists the resource versions stored for id.
func (d *dotenv) versions(id string) []int {
	entries, err := os.ReadDir(filepath.Join(d.dir, id))
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		if n, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".env")); err == nil && strings.HasSuffix(e.Name(), ".env") {
			out = append(out, n)
		}
	}
	return out
}

func (d *dotenv) GetValue(_ context.Context, req cairn.GetValueRequest) (json.RawMessage, error) {
	b, err := os.ReadFile(d.file(req.InstanceID, req.ResourceVersion))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, cairn.Errorf(cairn.CodeNotFound, "TypeInstance %q has no resource version %d", req.InstanceID, req.ResourceVersion)
	}
	if err != nil {
		return nil, err
	}
	v, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "value=")
	if !ok {
		return nil, fmt.Errorf("%s: not a dotenv file with a value", d.file(req.InstanceID, req.ResourceVersion))
	}
	return json.RawMessage(v), nil
}

func (d *dotenv) OnCreate(_ context.Context, req cairn.OnCreateRequest) (json.RawMessage, error) {
	d.record("OnCreate %s", req.InstanceID)
	if _, err := os.Stat(filepath.Join(d.dir, req.InstanceID)); err == nil {
		return nil, cairn.Errorf(cairn.CodeAlreadyExists, "TypeInstance %q exists", req.InstanceID)
	}
	return nil, d.write(req.InstanceID, 1, req.Value)
}

func (d *dotenv) OnUpdate(_ context.Context, req cairn.OnUpdateRequest) (json.RawMessage, error) {
	d.record("OnUpdate %s %d", req.InstanceID, req.NewResourceVersion)
	var probe struct {
		Refuse bool `json:"refuse"`
	}
	if json.Unmarshal(req.NewValue, &probe) == nil && probe.Refuse {
		return nil, errRefuse
	}
	owner, err := d.lockedBy(req.InstanceID)
	if err != nil {
		return nil, err
	}
	if owner != "" && owner != req.OwnerID {
		return nil, cairn.Errorf(cairn.CodeLocked, "TypeInstance %q is locked by %q", req.InstanceID, owner)
	}
	if _, err := os.Stat(d.file(req.InstanceID, req.NewResourceVersion)); err == nil {
		return nil, cairn.Errorf(cairn.CodeAlreadyExists, "TypeInstance %q has resource version %d", req.InstanceID, req.NewResourceVersion)
	}
	return nil, d.write(req.InstanceID, req.NewResourceVersion, req.NewValue)
}

func (d *dotenv) OnDelete(_ context.Context, req cairn.OnDeleteRequest) error {
	d.record("OnDelete %s", req.InstanceID)
	if _, err := os.Stat(filepath.Join(d.dir, req.InstanceID)); err != nil {
		return cairn.Errorf(cairn.CodeNotFound, "TypeInstance %q was not found", req.InstanceID)
	}
	return os.RemoveAll(filepath.Join(d.dir, req.InstanceID))
}

func (d *dotenv) OnDeleteRevision(_ context.Context, req cairn.OnDeleteRevisionRequest) error {
	d.record("OnDeleteRevision %s %d", req.InstanceID, req.ResourceVersion)
	err := os.Remove(d.file(req.InstanceID, req.ResourceVersion))
	if errors.Is(err, fs.ErrNotExist) {
		return cairn.Errorf(cairn.CodeNotFound, "TypeInstance %q has no resource version %d", req.InstanceID, req.ResourceVersion)
	}
	return err
}

func (d *dotenv) lockedBy(id string) (string, error) {
	b, err := os.ReadFile(filepath.Join(d.dir, id, "lock"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	return string(b), err
}

func (d *dotenv) GetLockedBy(_ context.Context, req cairn.GetLockedByRequest) (string, error) {
	return d.lockedBy(req.InstanceID)
}

func (d *dotenv) OnLock(_ context.Context, req cairn.OnLockRequest) error {
	d.record("OnLock %s", req.InstanceID)
	return os.WriteFile(filepath.Join(d.dir, req.InstanceID, "lock"), []byte(req.LockedBy), 0o600)
}

func (d *dotenv) OnUnlock(_ context.Context, req cairn.OnUnlockRequest) error {
	d.record("OnUnlock %s", req.InstanceID)
	err := os.Remove(filepath.Join(d.dir, req.InstanceID, "lock"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
