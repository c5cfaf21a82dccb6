package gitsync_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/backend/git"
	"github.com/cairn-dev/cairn/controller/gitsync"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// With a webhook secret, only pushes signed as GitHub, Gitea or GitLab sign
// them get through; the others get 401 and sync nothing.
func TestWebhookSecret(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "cairn.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h, err := hub.New(ctx, hub.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	secret := []byte("s3cret")
	svc, err := gitsync.NewSyncService(gitsync.SyncServiceConfig{Hub: h, Opener: git.NewOpener(git.OpenerConfig{CacheDir: t.TempDir()}), WebhookSecret: secret})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)

	body := `{"ref":"refs/heads/main"}`
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(body))
	good := hex.EncodeToString(mac.Sum(nil))
	tests := []struct {
		name   string
		header map[string]string
		want   int
	}{
		{"unsigned", nil, http.StatusUnauthorized},
		{"GitHub", map[string]string{"X-Hub-Signature-256": "sha256=" + good}, http.StatusNotFound},
		{"GitHub, wrong signature", map[string]string{"X-Hub-Signature-256": "sha256=" + strings.Repeat("0", 64)}, http.StatusUnauthorized},
		{"Gitea", map[string]string{"X-Gitea-Signature": good}, http.StatusNotFound},
		{"GitLab", map[string]string{"X-Gitlab-Token": "s3cret"}, http.StatusNotFound},
		{"GitLab, wrong token", map[string]string{"X-Gitlab-Token": "guess"}, http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/hooks/git/no-such-backend", strings.NewReader(body))
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			// 404: the signature was accepted and the (unknown) backend looked up.
			if resp.StatusCode != tt.want {
				t.Errorf("status %d, want %d", resp.StatusCode, tt.want)
			}
		})
	}
	// The pushes are public (their signature is their credential): a
	// large unsigned one is refused without the server holding its body,
	// or anyone could make it allocate 25 MiB per request at will.
	t.Run("large unsigned", func(t *testing.T) {
		const size = 20 << 20
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		rec := httptest.NewRecorder()
		svc.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/hooks/git/no-such-backend", io.LimitReader(zeros{}, size)))
		runtime.ReadMemStats(&after)
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("status %d, want 401", rec.Code)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > size/5 {
			t.Errorf("refusing a %d-byte unsigned push allocated %d bytes", size, n)
		}
	})
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
