package web

import (
	"mime"
	"testing"
)

// The console names its files' types itself; they must be what the mime
// package would have said.
func TestContentTypeAgreesWithMime(t *testing.T) {
	for _, ext := range []string{".html", ".js", ".mjs", ".css", ".svg", ".json", ".png", ".wasm"} {
		if got, want := contentType(ext), mime.TypeByExtension(ext); got != want {
			t.Errorf("contentType(%q) = %q, mime says %q", ext, got, want)
		}
	}
	if got := contentType(".no-such-extension"); got != "application/octet-stream" {
		t.Errorf("contentType of an unknown extension = %q, want application/octet-stream", got)
	}
}
