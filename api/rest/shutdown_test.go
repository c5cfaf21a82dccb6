package rest_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// StopWatches ends open watch streams, so a server can shut down while
// clients are watching.
func TestStopWatchesEndsStreams(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h, err := hub.New(ctx, hub.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	api := rest.New(rest.Config{Hub: h})
	srv := httptest.NewServer(api)
	defer srv.Close()

	resp, err := srv.Client().Get(srv.URL + "/apis/hub.cairn.dev/v1/typeinstances?watch=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("watch: %s", resp.Status)
	}
	ended := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
		}
		close(ended)
	}()
	api.StopWatches()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the watch stream did not end after StopWatches")
	}
}
