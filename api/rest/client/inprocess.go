package client

import (
	"fmt"
	"io"
	"net/http"
	"sync"
)

// InProcessURL is the server URL of a Client made by NewInProcess.
const InProcessURL = "http://in-process"

// NewInProcess returns a client whose requests h serves in this process:
// no socket, no listener, the same requests and answers as over the
// network (streams included, for watches). The CLI uses it in local mode
// with the REST façade over a hub on the local store, so a command behaves
// alike with and without a server.
func NewInProcess(h http.Handler, opts ...Option) *Client {
	c, _ := New(InProcessURL, opts...) // a valid URL
	c.hc = &http.Client{Transport: handlerTransport{h: h}}
	return c
}

// handlerTransport is an http.RoundTripper that calls a handler.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	if req.Body == nil {
		req.Body = http.NoBody
	}
	req.RequestURI = req.URL.RequestURI()
	req.RemoteAddr = "in-process"
	pr, pw := io.Pipe()
	rw := &pipeResponse{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	go func() {
		defer func() {
			if p := recover(); p != nil {
				rw.WriteHeader(http.StatusInternalServerError)
				pw.CloseWithError(fmt.Errorf("in-process handler panicked: %v", p))
				return
			}
			rw.WriteHeader(http.StatusOK) // a handler that wrote nothing
			pw.Close()
		}()
		t.h.ServeHTTP(rw, req)
	}()
	select {
	case <-rw.ready:
	case <-req.Context().Done():
		pr.CloseWithError(req.Context().Err())
		return nil, req.Context().Err()
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", rw.code, http.StatusText(rw.code)), StatusCode: rw.code,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: rw.sent, Body: pr, ContentLength: -1, Request: req,
	}, nil
}

// pipeResponse is the handler's side of an in-process response: the
// headers go out once, at the first WriteHeader or Write; the body streams
// through a pipe the client reads.
type pipeResponse struct {
	header http.Header
	pw     *io.PipeWriter

	once  sync.Once
	ready chan struct{}
	code  int
	sent  http.Header
}

func (w *pipeResponse) Header() http.Header { return w.header }

func (w *pipeResponse) WriteHeader(code int) {
	w.once.Do(func() {
		w.code, w.sent = code, w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeResponse) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.pw.Write(b)
}

// Flush is a no-op: every Write reaches the reader as it is made.
func (w *pipeResponse) Flush() {}
