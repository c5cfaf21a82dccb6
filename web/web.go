// Package web serves cairn's web console: plain ES modules and CSS,
// embedded in the binary, that talk to the hub only through its public REST
// and GraphQL APIs. Nothing here reads the store or calls the hub.
package web

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"sync"
)

//go:embed static
var static embed.FS

// Prefix is where the console is mounted; its pages link to assets under it.
const Prefix = "/ui/"

// contentSecurityPolicy allows only the console's own scripts and styles
// and requests to the same origin: it works offline and loads nothing else.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

type asset struct {
	body        []byte
	contentType string
	etag        string
}

// Handler serves the console under Prefix: Prefix itself is index.html and
// every other path names an embedded file. Assets are revalidated on each
// load (ETag), so an upgraded binary is seen at once. They are read (and
// hashed) at the first request, not when the server starts: a hub whose
// console nobody opens does not keep a copy of them.
func Handler() http.Handler {
	load := sync.OnceValue(loadAssets)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "the web console is read with GET", http.StatusMethodNotAllowed)
			return
		}
		assets := load()
		name := strings.TrimPrefix(r.URL.Path, Prefix)
		if name == "" || name == "index.html" {
			name = "index.html"
		}
		a, ok := assets[name]
		if !ok {
			http.Error(w, "no such file in the web console: "+name, http.StatusNotFound)
			return
		}
		h := w.Header()
		h.Set("Content-Type", a.contentType)
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", a.etag)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("Referrer-Policy", "same-origin")
		if r.Header.Get("If-None-Match") == a.etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(a.body)
	})
}

// loadAssets reads the embedded files with their content types and ETags.
func loadAssets() map[string]asset {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree always has static/
	}
	assets := map[string]asset{}
	err = fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(sub, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		assets[p] = asset{body: b, contentType: contentType(path.Ext(p)), etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		panic(err) // reading embedded files does not fail
	}
	return assets
}

// contentType names the types of the console's own files itself: asking
// mime.TypeByExtension loads the system's MIME database, about 0.4 MB
// kept for the life of the process, to learn these few.
func contentType(ext string) string {
	switch ext {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js", ".mjs":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	case ".json":
		return "application/json"
	case ".png":
		return "image/png"
	}
	if ct := mime.TypeByExtension(ext); ct != "" {
		return ct
	}
	return "application/octet-stream"
}

// Redirect sends a browser from / to the console.
func Redirect() http.Handler {
	return http.RedirectHandler(Prefix, http.StatusFound)
}
