package audit_test

import (
	"bufio"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/auth/audit"
)

func TestWriterRotates(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	w, err := audit.Open(path, 600, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		ev := audit.NewEvent(audit.LevelMetadata, "id-"+string(rune('a'+i)), time.Now())
		ev.Verb, ev.RequestURI, ev.User = "get", "/apis", audit.UserInfo{Username: "jane"}
		if err := w.Write(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("audit file: %v %v", st, err)
	}
	for _, f := range []string{path, path + ".1", path + ".2"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > 600 {
			t.Errorf("%s has %d bytes, over the 600 limit", f, len(b))
		}
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for sc.Scan() {
			var ev audit.Event
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.APIVersion != "audit.k8s.io/v1" || ev.Kind != "Event" || ev.User.Username != "jane" {
				t.Errorf("%s: line %q: %v", f, sc.Text(), err)
			}
		}
	}
	if _, err := os.Stat(path + ".3"); !os.IsNotExist(err) {
		t.Errorf("a third backup was kept: %v", err)
	}
}

func TestRequestObjectKeepsNoValues(t *testing.T) {
	body := `{"apiVersion":"hub.cairn.dev/v1","kind":"TypeInstance","metadata":{"name":"db","namespace":"a","labels":{"team":"x"},
	"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"spec\":{\"value\":{\"password\":\"hunter2\"}}}"}},
	"spec":{"value":{"password":"hunter2"},"context":{"token":"hunter2"}}}`
	got := string(audit.RequestObject([]byte(body)))
	if strings.Contains(got, "hunter2") || strings.Contains(got, "spec") || strings.Contains(got, "annotations") {
		t.Fatalf("request object keeps a value: %s", got)
	}
	if !strings.Contains(got, `"name":"db"`) || !strings.Contains(got, `"kind":"TypeInstance"`) || !strings.Contains(got, `"team":"x"`) {
		t.Fatalf("request object lost its identity: %s", got)
	}
	if audit.RequestObject([]byte("not json")) != nil {
		t.Fatal("a non-JSON body gave a request object")
	}
	// Parameters named like credentials, whatever else their name holds
	// (an S3 client's presigned URL sent to cairn by mistake, an API key).
	for _, q := range []string{"token=hunter2", "refresh_token=hunter2", "X-Amz-Signature=hunter2", "X-Amz-Credential=hunter2%2F20261124",
		"X-Amz-Security-Token=hunter2", "client_secret=hunter2", "api_key=hunter2", "apiKey=hunter2", "key=hunter2", "sig=hunter2", "passwd=hunter2"} {
		u, _ := url.Parse("/graphql?" + q + "&labelSelector=a%3Db&continue=c1&lockOwner=deploy-42")
		if uri := audit.RequestURI(u); strings.Contains(uri, "hunter2") || !strings.Contains(uri, "labelSelector=a%3Db&lockOwner=deploy-42") || !strings.Contains(uri, "continue=c1") {
			t.Errorf("request URI of ?%s: %s", q, uri)
		}
	}
}
