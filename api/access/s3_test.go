package access_test

import (
	"encoding/xml"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/api/access"
	"github.com/cairn-dev/cairn/auth/authn"
)

// TestS3RequestsAnsweredInS3sTerms: cairn serves no S3 API. An S3 client
// pointed at it (tofu's backend "s3", the aws CLI) signs its requests with
// AWS Signature Version 4, which the guard refused as a bad bearer token:
// the operator read "api error Unauthorized: Unauthorized" and went
// looking for a wrong key. Such a request is answered with an S3 error
// document naming what cairn serves instead, a 4xx (S3 clients retry 5xx),
// before it reaches any handler; every other request is unchanged.
func TestS3RequestsAnsweredInS3sTerms(t *testing.T) {
	h := sqliteHub(t)
	tf, err := authn.ParseTokenFile(strings.NewReader("ada-token,ada,1,cairn:admins\n"))
	if err != nil {
		t.Fatal(err)
	}
	g := access.New(access.Config{Authn: &authn.Chain{Tokens: []authn.TokenAuthenticator{tf}}, Authz: h})
	srv := httptest.NewServer(g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "handler") })))
	t.Cleanup(srv.Close)

	const sigV4 = "AWS4-HMAC-SHA256 Credential=AKIAEXAMPLE/20261124/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=0123abcd"
	for _, tc := range []struct {
		name, method, path, auth string
		code                     int
		s3Error                  bool
	}{
		{"ListObjectsV2 (tofu init lists workspaces)", "GET", "/default?list-type=2&prefix=env%3A%2F", sigV4, 400, true},
		{"GetObject", "GET", "/default/network/terraform.tfstate?x-id=GetObject", sigV4, 400, true},
		{"PutObject (the lock file)", "PUT", "/default/network/terraform.tfstate.tflock", sigV4, 400, true},
		{"ListBuckets", "GET", "/?x-id=ListBuckets", sigV4, 400, true},
		{"signature version 2", "GET", "/default/", "AWS AKIAEXAMPLE:c2lnbmF0dXJl", 400, true},
		{"presigned URL", "GET", "/default/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAEXAMPLE%2F20261124%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Signature=00", "", 400, true},
		{"HeadBucket: no body", "HEAD", "/default", sigV4, 400, false},
		{"a bearer token still reaches the handler", "GET", "/healthz", "Bearer ada-token", 200, false},
		{"a bad bearer token is still 401", "GET", "/healthz", "Bearer nope", 401, false},
		{"a query parameter named like S3's alone is not S3", "GET", "/healthz?X-Amz-Date=1", "Bearer ada-token", 200, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, srv.URL+tc.path, nil)
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.code {
				t.Fatalf("%s %s: %d %q, want %d", tc.method, tc.path, resp.StatusCode, body, tc.code)
			}
			if !tc.s3Error {
				if strings.Contains(string(body), "<Error>") {
					t.Errorf("%s %s answered an S3 error: %q", tc.method, tc.path, body)
				}
				return
			}
			var e struct {
				XMLName  xml.Name `xml:"Error"`
				Code     string   `xml:"Code"`
				Message  string   `xml:"Message"`
				Resource string   `xml:"Resource"`
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/xml" {
				t.Errorf("Content-Type %q, want application/xml", ct)
			}
			if err := xml.Unmarshal(body, &e); err != nil {
				t.Fatalf("not an S3 error document: %v: %q", err, body)
			}
			if e.Code != "NotImplemented" || !strings.Contains(e.Message, "no S3 API") ||
				!strings.Contains(e.Message, `backend "http"`) || !strings.Contains(e.Message, "/terraform/v1/namespaces/") {
				t.Errorf("S3 error %+v: want Code NotImplemented and a message naming the http backend's address", e)
			}
			if want := strings.SplitN(tc.path, "?", 2)[0]; e.Resource != want {
				t.Errorf("Resource %q, want %q", e.Resource, want)
			}
			if strings.Contains(string(body), "AKIAEXAMPLE") || strings.Contains(string(body), "0123abcd") {
				t.Errorf("the answer quotes the credential: %q", body)
			}
		})
	}
}
