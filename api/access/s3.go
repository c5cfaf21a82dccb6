package access

import (
	"encoding/xml"
	"net/http"
	"strings"
)

// s3Signed reports whether r is signed the way S3 clients sign (AWS
// Signature Version 4 or 2 in the Authorization header, or a presigned
// URL's X-Amz-Signature with X-Amz-Credential). No cairn client signs so;
// it is an S3 client (tofu's backend "s3", the aws CLI) pointed at cairn.
func s3Signed(r *http.Request) bool {
	if a := r.Header.Get("Authorization"); strings.HasPrefix(a, "AWS4-HMAC-SHA256 ") || strings.HasPrefix(a, "AWS ") {
		return true
	}
	if r.URL.RawQuery == "" || !strings.Contains(r.URL.RawQuery, "X-Amz-") {
		return false
	}
	q := r.URL.Query()
	return q.Has("X-Amz-Signature") && q.Has("X-Amz-Credential")
}

// s3NotServed is the message an S3 client shows (aws CLI, tofu: "api
// error NotImplemented: …"); it names what to use instead.
const s3NotServed = `cairn serves no S3 API: keep OpenTofu/Terraform state in cairn with backend "http" at ` +
	`/terraform/v1/namespaces/<namespace>/states/<name> (docs/terraform.md); ` +
	`cairn's S3 storage backend keeps instance values in an S3 service, it does not serve one`

// writeS3Refusal answers an S3 client with an S3 error document, so it
// shows the reason rather than a bare status. The status is 400, not S3's
// 501 for NotImplemented: S3 clients retry 5xx answers, and the request
// will not succeed on a retry. Nothing of the request is quoted back but
// its path, as S3 does in Resource; never the credential.
func writeS3Refusal(w http.ResponseWriter, r *http.Request) {
	type s3Error struct {
		XMLName  xml.Name `xml:"Error"`
		Code     string   `xml:"Code"`
		Message  string   `xml:"Message"`
		Resource string   `xml:"Resource"`
	}
	body, err := xml.Marshal(s3Error{Code: "NotImplemented", Message: s3NotServed, Resource: r.URL.Path})
	if err != nil {
		http.Error(w, s3NotServed, http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusBadRequest)
	if r.Method != http.MethodHead {
		_, _ = w.Write([]byte(xml.Header))
		_, _ = w.Write(body)
	}
}
