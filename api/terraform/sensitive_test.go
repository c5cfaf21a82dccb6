package terraform_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// sensitiveState is a state whose output token is sensitive, its value
// secret-<n>.
func sensitiveState(serial int) string {
	return fmt.Sprintf(`{"version":4,"terraform_version":"1.10.10","serial":%d,"lineage":"L1","outputs":{`+
		`"ip":{"value":"10.0.0.%d","type":"string"},"token":{"value":"secret-%d","type":"string","sensitive":true}},"resources":[]}`,
		serial, serial, serial)
}

// watchLines opens a watch on url and sends its lines until ctx ends.
func watchLines(t *testing.T, ctx context.Context, url string) <-chan string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"?watch=true", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("watch %s: %s", url, resp.Status)
	}
	out := make(chan string, 64)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			out <- sc.Text()
		}
	}()
	return out
}

// A sensitive output's value is hidden in the events of a watch as in a
// list: of its kind, of typeinstances, of the states (whose documents hold
// it too).
func TestSensitiveOutputsHiddenInWatches(t *testing.T) {
	s := startServer(t, sqliteStore(t), nil)
	p := statesP + "app"
	if code, body, _ := do(t, s.url, call{method: "POST", path: p, body: sensitiveState(1)}); code != 200 {
		t.Fatalf("POST: %d %s", code, body)
	}

	ctx, stop := context.WithTimeout(t.Context(), 30*time.Second)
	defer stop()
	watches := map[string]<-chan string{}
	for _, path := range []string{
		"/apis/terraform.cairn.dev/v1/namespaces/default/terraformsensitiveoutputs",
		"/apis/terraform.cairn.dev/v1/terraformstates",
		"/apis/hub.cairn.dev/v1/typeinstances",
	} {
		watches[path] = watchLines(t, ctx, s.url+path)
	}
	if code, body, _ := do(t, s.url, call{method: "POST", path: p, body: sensitiveState(2)}); code != 200 {
		t.Fatalf("POST: %d %s", code, body)
	}
	// Each watch shows the instances (ADDED) and then the second write
	// (MODIFIED), with the value hidden.
	for path, lines := range watches {
		var seen []string
		for l := range lines {
			seen = append(seen, l)
			if strings.Contains(l, "secret-") {
				t.Errorf("watch %s shows a sensitive value:\n%s", path, l)
			}
			if strings.Contains(l, `"MODIFIED"`) && strings.Contains(l, "(sensitive value)") {
				break
			}
		}
		if ctx.Err() != nil {
			t.Errorf("watch %s: no MODIFIED event with the value hidden:\n%s", path, strings.Join(seen, "\n"))
		}
	}
	stop()

}
