package terraform_test

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/cairn-dev/cairn"
	s3backend "github.com/cairn-dev/cairn/backend/s3"
	"github.com/cairn-dev/cairn/backend/s3/s3test"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/policy"
)

// bigState returns a version-4 state of about size bytes (many
// terraform_data resources), with the given serial.
func bigState(serial, size int) []byte { return bigStateOf("bench", serial, size) }

// bigStateOf is bigState of the given lineage.
func bigStateOf(lineage string, serial, size int) []byte {
	var res []string
	pad := strings.Repeat("x", 900)
	for i := 0; len(res)*1000 < size; i++ {
		res = append(res, fmt.Sprintf(`{"mode":"managed","type":"terraform_data","name":"r%d","provider":"provider[\"terraform.io/builtin/terraform\"]","instances":[{"schema_version":0,"attributes":{"id":"%d","input":%q}}]}`, i, i, pad))
	}
	return []byte(fmt.Sprintf(`{"version":4,"terraform_version":"1.10.10","serial":%d,"lineage":%q,"outputs":{"ip":{"value":"10.0.0.%d","type":"string"}},"resources":[%s]}`,
		serial, lineage, serial%250, strings.Join(res, ",")))
}

// baseline does what OpenTofu's own s3 backend does on the same
// versitygw: the state is one object (PUT with Content-MD5, GET), the lock
// a lock file written with If-None-Match: * and deleted (use_lockfile).
type baseline struct {
	c      *minio.Client
	bucket string
}

func (s baseline) put(b *testing.B, doc []byte) {
	opts := minio.PutObjectOptions{ContentType: "application/json", SendContentMd5: true}
	if _, err := s.c.PutObject(b.Context(), s.bucket, "env/terraform.tfstate", bytes.NewReader(doc), int64(len(doc)), opts); err != nil {
		b.Fatal(err)
	}
}

func (s baseline) get(b *testing.B) []byte {
	o, err := s.c.GetObject(b.Context(), s.bucket, "env/terraform.tfstate", minio.GetObjectOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer o.Close()
	data, err := io.ReadAll(o)
	if err != nil {
		b.Fatal(err)
	}
	return data
}

func (s baseline) lockUnlock(b *testing.B, info []byte) {
	var opts minio.PutObjectOptions
	opts.SetMatchETagExcept("*")
	if _, err := s.c.PutObject(b.Context(), s.bucket, "env/terraform.tfstate.tflock", bytes.NewReader(info), int64(len(info)), opts); err != nil {
		b.Fatal(err)
	}
	if err := s.c.RemoveObject(b.Context(), s.bucket, "env/terraform.tfstate.tflock", minio.RemoveObjectOptions{}); err != nil {
		b.Fatal(err)
	}
}

func request(b *testing.B, method, url string, body []byte) []byte {
	req, err := http.NewRequestWithContext(b.Context(), method, url, bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	if method == http.MethodPost {
		sum := md5.Sum(body)
		req.Header.Set("Content-MD5", base64.StdEncoding.EncodeToString(sum[:]))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("%s %s: %s %s", method, url, resp.Status, out)
	}
	return out
}

// benchServers starts a versitygw and two cairn servers on SQLite: one
// keeping states in the built-in backend, one in an S3 backend on that
// versitygw.
func benchServers(b *testing.B) (builtin, inS3 *server, base baseline) {
	builtin, inS3, base, _ = benchServersOn(b)
	return builtin, inS3, base
}

// benchServersOn is benchServers, also returning the versitygw.
func benchServersOn(b *testing.B) (builtin, inS3 *server, base baseline, srv *s3test.Server) {
	srv = s3test.Start(b)
	srv.Bucket(b, "bench")
	base = baseline{c: srv.Client(b), bucket: "bench"}
	builtin = startServer(b, sqliteStore(b), nil)
	env := map[string]string{"AWS_ACCESS_KEY_ID": srv.AccessKey, "AWS_SECRET_ACCESS_KEY": srv.SecretKey}
	inS3 = startServer(b, sqliteStore(b), s3backend.NewOpener(s3backend.OpenerConfig{Getenv: func(k string) string { return env[k] }}))
	ctx := cairn.WithActor(b.Context(), "bench")
	if _, _, err := inS3.hub.ApplyType(ctx, s3backend.StorageType()); err != nil {
		b.Fatal(err)
	}
	created, err := inS3.hub.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{
		Name: "s3", Namespace: hub.SystemNamespace, TypeRef: s3backend.StorageType().Ref(),
		Attributes: []cairn.AttributeRef{{Path: cairn.StorageAttributePath, Revision: cairn.CoreRevision}},
		Value:      json.RawMessage(fmt.Sprintf(`{"url":%q,"acceptValue":true,"bucket":"bench","prefix":"cairn"}`, srv.Endpoint)),
	}}})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := inS3.hub.ApplyPolicy(ctx, policy.Policy{TypeInstance: policy.TypeInstancePolicy{Rules: []policy.Rule{
		{TypeRef: policy.TypeRef{Path: hub.TerraformStatePath}, Backend: policy.BackendRef{ID: created[0].ID}},
		{TypeRef: policy.TypeRef{Path: "cap.type.terraform.*"}, Backend: policy.BackendRef{ID: created[0].ID}},
	}}}); err != nil {
		b.Fatal(err)
	}
	return builtin, inS3, base, srv
}

// timed runs fn and adds its duration to *d.
func timed(d *time.Duration, fn func()) {
	start := time.Now()
	fn()
	*d += time.Since(start)
}

func report(b *testing.B, cairnT, cairnS3T, s3T time.Duration) {
	n := float64(b.N)
	b.ReportMetric(float64(cairnT.Microseconds())/n, "cairn-µs/op")
	b.ReportMetric(float64(cairnS3T.Microseconds())/n, "cairn-s3-µs/op")
	b.ReportMetric(float64(s3T.Microseconds())/n, "tofu-s3-µs/op")
	b.ReportMetric(float64(cairnT)/float64(s3T), "cairn/tofu-s3")
	b.ReportMetric(float64(cairnS3T)/float64(s3T), "cairn-s3/tofu-s3")
}

// BenchmarkStatePost1MB: a 1 MB state POST (a new resource version and its
// output instance) against the same PUT by OpenTofu's s3 backend.
func BenchmarkStatePost1MB(b *testing.B) {
	builtin, inS3, base := benchServers(b)
	var cT, csT, sT time.Duration
	b.ResetTimer()
	for i := range b.N {
		doc := bigState(i+1, 1<<20)
		timed(&cT, func() { request(b, http.MethodPost, stateURL(builtin.url, "default", "big"), doc) })
		timed(&csT, func() { request(b, http.MethodPost, stateURL(inS3.url, "default", "big"), doc) })
		timed(&sT, func() { base.put(b, doc) })
	}
	report(b, cT, csT, sT)
}

// BenchmarkStateGet1MB: GET of a 1 MB state against the s3 backend's GET.
func BenchmarkStateGet1MB(b *testing.B) {
	builtin, inS3, base := benchServers(b)
	doc := bigState(1, 1<<20)
	request(b, http.MethodPost, stateURL(builtin.url, "default", "big"), doc)
	request(b, http.MethodPost, stateURL(inS3.url, "default", "big"), doc)
	base.put(b, doc)
	var cT, csT, sT time.Duration
	b.ResetTimer()
	for range b.N {
		timed(&cT, func() { request(b, http.MethodGet, stateURL(builtin.url, "default", "big"), nil) })
		timed(&csT, func() { request(b, http.MethodGet, stateURL(inS3.url, "default", "big"), nil) })
		timed(&sT, func() { base.get(b) })
	}
	report(b, cT, csT, sT)
}

// BenchmarkLockUnlock: a LOCK and UNLOCK round trip against the s3
// backend's lock file.
func BenchmarkLockUnlock(b *testing.B) {
	builtin, inS3, base := benchServers(b)
	doc := bigState(1, 1000)
	request(b, http.MethodPost, stateURL(builtin.url, "default", "l"), doc)
	request(b, http.MethodPost, stateURL(inS3.url, "default", "l"), doc)
	var cT, csT, sT time.Duration
	b.ResetTimer()
	for i := range b.N {
		info := []byte(fmt.Sprintf(`{"ID":"lock-%d","Operation":"OperationTypeApply","Who":"bench@host","Version":"1.10.10","Created":"2026-11-23T10:00:00Z","Path":"","Info":""}`, i))
		for _, s := range []struct {
			srv *server
			d   *time.Duration
		}{{builtin, &cT}, {inS3, &csT}} {
			timed(s.d, func() {
				request(b, "LOCK", stateURL(s.srv.url, "default", "l"), info)
				request(b, "UNLOCK", stateURL(s.srv.url, "default", "l"), info)
			})
		}
		timed(&sT, func() { base.lockUnlock(b, info) })
	}
	report(b, cT, csT, sT)
}

// s3Config is a configuration keeping its state with OpenTofu's own s3
// backend (lock file included) in bucket bench of endpoint.
const s3Config = `terraform {
  backend "s3" {
    bucket                      = "bench"
    key                         = "tofu/terraform.tfstate"
    region                      = "us-east-1"
    endpoints                   = { s3 = %q }
    use_path_style              = true
    use_lockfile                = true
    skip_credentials_validation = true
    skip_region_validation      = true
    skip_requesting_account_id  = true
    skip_metadata_api_check     = true
  }
}
`

// BenchmarkTofuStatePushPull1MB runs the real tofu against each backend:
// `tofu state push` of a 1 MB state (lock, read, write, unlock) and `tofu
// state pull`, with cairn's http backend (built-in store, S3 backend) and
// with OpenTofu's own s3 backend, all on the same versitygw, interleaved.
// Each figure includes starting tofu, which the ratios dilute; the
// request-level benchmarks above isolate the backends.
func BenchmarkTofuStatePushPull1MB(b *testing.B) {
	bin := tofuBinary(b)
	builtin, inS3, _, srv := benchServersOn(b)
	type target struct {
		name, lineage string
		w             *workdir
		push, pull    time.Duration
	}
	var targets []*target
	for _, t := range []struct{ name, cfg string }{
		{"cairn", fmt.Sprintf(config, stateURL(builtin.url, "default", "tofu"), stateURL(builtin.url, "default", "tofu"), stateURL(builtin.url, "default", "tofu"))},
		{"cairn-s3", fmt.Sprintf(config, stateURL(inS3.url, "default", "tofu"), stateURL(inS3.url, "default", "tofu"), stateURL(inS3.url, "default", "tofu"))},
		{"tofu-s3", fmt.Sprintf(s3Config, srv.Endpoint)},
	} {
		w := &workdir{t: b, tofu: bin, dir: b.TempDir(), env: srv.Env()}
		if err := os.WriteFile(filepath.Join(w.dir, "main.tf"), []byte(t.cfg), 0o644); err != nil {
			b.Fatal(err)
		}
		w.must("init", "-input=false", "-no-color")
		targets = append(targets, &target{name: t.name, w: w})
	}
	file := filepath.Join(b.TempDir(), "state.json")
	push := func(serial int, args ...string) {
		for _, t := range targets {
			if err := os.WriteFile(file, bigStateOf(t.lineage, serial, 1<<20), 0o644); err != nil {
				b.Fatal(err)
			}
			timed(&t.push, func() {
				if out, err := t.w.run(append(append([]string{"state", "push"}, args...), file)...); err != nil {
					b.Fatalf("%s: tofu state push of serial %d: %v\n%s", t.name, serial, err, out)
				}
			})
		}
	}
	// The first push into an empty backend is forced; the backend's state
	// gets a lineage of tofu's choosing, which the next ones keep.
	push(1, "-force")
	for _, t := range targets {
		t.push = 0
		var st struct{ Lineage string }
		if err := json.Unmarshal([]byte(t.w.must("state", "pull")), &st); err != nil || st.Lineage == "" {
			b.Fatalf("%s: the pushed state has no lineage: %v", t.name, err)
		}
		t.lineage = st.Lineage
	}
	b.ResetTimer()
	for i := range b.N {
		// Far apart: tofu adds one to a pushed serial when it writes.
		serial := 100 * (i + 2)
		push(serial)
		for _, t := range targets {
			var out string
			timed(&t.pull, func() { out = t.w.must("state", "pull") })
			// (tofu numbers the serials itself; the output tells the pushes apart.)
			var st struct {
				Outputs struct{ IP struct{ Value string } }
			}
			want := fmt.Sprintf("10.0.0.%d", serial%250)
			if err := json.Unmarshal([]byte(out), &st); err != nil || st.Outputs.IP.Value != want {
				b.Fatalf("%s: tofu state pull shows output ip %q (%v), want the pushed %q", t.name, st.Outputs.IP.Value, err, want)
			}
		}
	}
	n := float64(b.N)
	for _, t := range targets {
		b.ReportMetric(float64(t.push.Milliseconds())/n, t.name+"-push-ms/op")
		b.ReportMetric(float64(t.pull.Milliseconds())/n, t.name+"-pull-ms/op")
	}
	s3 := targets[2]
	for _, t := range targets[:2] {
		b.ReportMetric(float64(t.push)/float64(s3.push), t.name+"/tofu-s3-push")
		b.ReportMetric(float64(t.pull)/float64(s3.pull), t.name+"/tofu-s3-pull")
	}
}
