package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/file"
	"github.com/cairn-dev/cairn/sdk/storagebackend"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// stallingBackend is the example file backend served over gRPC by the test
// itself, which can make the next create, update or delete stall before or
// after the value is stored (or deleted), until the hub's call goes away
// with the process the test kills.
type stallingBackend struct {
	*file.Backend
	mu      sync.Mutex
	when    string            // "", "before" or "after" storing
	stalled chan stalledWrite // what stalled
}

type stalledWrite struct {
	id string
	rv int
}

func (b *stallingBackend) stallNext(when string) chan stalledWrite {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.when, b.stalled = when, make(chan stalledWrite, 1)
	return b.stalled
}

// stall blocks until the caller gives up (its process died) when a stall
// was asked for at this point, once.
func (b *stallingBackend) stall(ctx context.Context, at string, w stalledWrite) {
	b.mu.Lock()
	if b.when != at {
		b.mu.Unlock()
		return
	}
	b.when = ""
	ch := b.stalled
	b.mu.Unlock()
	ch <- w
	<-ctx.Done()
}

func (b *stallingBackend) OnCreate(ctx context.Context, req cairn.OnCreateRequest) (json.RawMessage, error) {
	w := stalledWrite{req.InstanceID, 1}
	b.stall(ctx, "before", w)
	out, err := b.Backend.OnCreate(ctx, req)
	b.stall(ctx, "after", w)
	return out, err
}

func (b *stallingBackend) OnUpdate(ctx context.Context, req cairn.OnUpdateRequest) (json.RawMessage, error) {
	w := stalledWrite{req.InstanceID, req.NewResourceVersion}
	b.stall(ctx, "before", w)
	out, err := b.Backend.OnUpdate(ctx, req)
	b.stall(ctx, "after", w)
	return out, err
}

func (b *stallingBackend) OnDelete(ctx context.Context, req cairn.OnDeleteRequest) error {
	w := stalledWrite{req.InstanceID, 0}
	b.stall(ctx, "before", w)
	err := b.Backend.OnDelete(ctx, req)
	b.stall(ctx, "after", w)
	return err
}

// TestKilledMidWriteRecovers kills a real cairn serve (SIGKILL) while a
// create, an update or a delete waits on an external backend, before and
// after the backend stored (or deleted) the value, restarts it, and checks
// that recovery leaves no value in the backend the hub does not know and
// nothing in the hub the backend lacks.
func TestKilledMidWriteRecovers(t *testing.T) {
	b := newBackupBinary(t)
	dir := t.TempDir()
	data, values := filepath.Join(dir, "data"), filepath.Join(dir, "values")
	fb, err := file.New(file.Config{Dir: values})
	if err != nil {
		t.Fatal(err)
	}
	backend := &stallingBackend{Backend: fb}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := storagebackend.NewValueServer(backend, storagebackend.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ctx, lis) }()
	t.Cleanup(func() { cancel(); <-served })

	serveArgs := []string{"--recovery-grace", "1s", "--recovery-interval", "300ms"}
	url, stop := b.serve(data, serveArgs...)
	b.must("--server", url, "backends", "register", "--url", "grpc://"+lis.Addr().String(), "--accept-value", "--alias", "files")
	manifest := func(name string, v int) string {
		p := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(p, []byte(`apiVersion: hub.cairn.dev/v1
kind: TypeInstance
metadata: {name: `+name+`}
spec:
  typeRef: {path: cap.type.test.secret, revision: 0.1.0}
  backend: {id: files}
  value: {v: `+strings.Repeat("1", v)+`}
`), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, name := range []string{"kept", "doomed-1", "doomed-2"} {
		b.must("--server", url, "apply", "-f", manifest(name, 1))
	}
	stop()

	steps := []struct {
		name string
		when string
		args func(url string) []string
	}{
		{"create, killed before the backend stored", "before", func(url string) []string {
			return []string{"--server", url, "apply", "-f", manifest("never-1", 1)}
		}},
		{"create, killed after the backend stored", "after", func(url string) []string {
			return []string{"--server", url, "apply", "-f", manifest("never-2", 1)}
		}},
		{"update, killed before the backend stored", "before", func(url string) []string {
			return []string{"--server", url, "apply", "-f", manifest("kept", 2)}
		}},
		{"update, killed after the backend stored", "after", func(url string) []string {
			return []string{"--server", url, "apply", "-f", manifest("kept", 3)}
		}},
		// A delete reaches the backend after its commit.
		{"delete, killed before the backend deleted", "before", func(url string) []string {
			return []string{"--server", url, "delete", "-f", manifest("doomed-1", 1)}
		}},
		{"delete, killed after the backend deleted", "after", func(url string) []string {
			return []string{"--server", url, "delete", "-f", manifest("doomed-2", 1)}
		}},
	}
	for _, step := range steps {
		srvCmd, url := b.start(data, serveArgs...)
		stalled := backend.stallNext(step.when)
		client := exec.Command(b.bin, step.args(url)...)
		client.Env = b.env
		if err := client.Start(); err != nil {
			t.Fatal(err)
		}
		var w stalledWrite
		select {
		case w = <-stalled:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: the write never reached the backend", step.name)
		}
		if err := srvCmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = srvCmd.Wait()
		_ = client.Wait()
		if w.rv == 0 { // a delete
			held := len(revisionFiles(t, values, w.id)) > 0
			if held != (step.when == "before") {
				t.Fatalf("%s: the backend holds %s: %v", step.name, w.id, held)
			}
			if _, ok := b.instances("--data-dir", data)[w.id]; ok {
				t.Fatalf("%s: the hub still has %s while the backend deletes it", step.name, w.id)
			}
		} else {
			stored := slices.Contains(revisionFiles(t, values, w.id), w.rv)
			if stored != (step.when == "after") {
				t.Fatalf("%s: revision %d of %s stored in the backend: %v", step.name, w.rv, w.id, stored)
			}
		}

		if n := len(intents(t, data)); n != 1 {
			t.Fatalf("%s: %d intents in the journal after the kill, want 1", step.name, n)
		}
		if out := b.must("--data-dir", data, "backends", "check", "files"); !strings.Contains(out, "1 interrupted write waits for recovery") {
			t.Fatalf("%s: backends check does not report the interrupted write:\n%s", step.name, out)
		}

		// Restart: recovery finishes the interrupted write.
		url, stop = b.serve(data, serveArgs...)
		deadline := time.Now().Add(20 * time.Second)
		for len(intents(t, data)) > 0 && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if in := intents(t, data); len(in) > 0 {
			t.Fatalf("%s: recovery left %+v", step.name, in)
		}
		consistent(t, b, url, values, step.name)
		stop()
	}

	// The version a dead process was on its way to is free again.
	url, stop = b.serve(data, serveArgs...)
	defer stop()
	b.must("--server", url, "apply", "-f", manifest("kept", 4))
	consistent(t, b, url, values, "after recovery")
}

// consistent checks that every value the backend holds belongs to a
// resource version the hub has, and that the hub can read every version's
// value from the backend.
func consistent(t *testing.T, b *backupBinary, url, values, step string) {
	t.Helper()
	out := b.must("--server", url, "get", "typeinstances", "-o", "json")
	var list struct {
		Items []struct {
			Metadata struct{ Name string }
			Spec     struct {
				TypeRef struct{ Path string } `json:"typeRef"`
				Value   json.RawMessage
			}
			Status struct {
				ResourceVersion int `json:"resourceVersion"`
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("%s: %v\n%s", step, err, out)
	}
	hubVersions := map[string]int{} // id -> latest, for instances in the file backend
	for _, it := range list.Items {
		if it.Spec.TypeRef.Path != "cap.type.test.secret" {
			continue
		}
		if len(it.Spec.Value) == 0 || string(it.Spec.Value) == "null" {
			t.Errorf("%s: the hub cannot read the value of %s from the backend", step, it.Metadata.Name)
		}
		hubVersions[it.Metadata.Name] = it.Status.ResourceVersion
	}
	entries, err := os.ReadDir(values)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		latest, known := hubVersions[e.Name()]
		for _, rv := range revisionFiles(t, values, e.Name()) {
			if !known || rv > latest {
				t.Errorf("%s: the backend holds revision %d of %s, which the hub does not know (hub latest %d, known %v)", step, rv, e.Name(), latest, known)
			}
		}
	}
	for id, latest := range hubVersions {
		if !slices.Contains(revisionFiles(t, values, id), latest) {
			t.Errorf("%s: the hub has revision %d of %s, the backend does not", step, latest, id)
		}
	}
}

// intents reads the journal of the SQLite store in dataDir, as a second
// process may while the server runs.
func intents(t *testing.T, dataDir string) []store.Intent {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(dataDir, "cairn.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	in, err := st.Intents(context.Background(), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// revisionFiles lists the resource versions the file backend keeps for id.
func revisionFiles(t *testing.T, values, id string) []int {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(values, id))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var rvs []int
	for _, e := range entries {
		var rv int
		if n, _ := fmt.Sscanf(e.Name(), "%d.json", &rv); n == 1 {
			rvs = append(rvs, rv)
		}
	}
	return rvs
}
