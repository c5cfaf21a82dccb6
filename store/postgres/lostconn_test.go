package postgres_test

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/postgres"
	"github.com/cairn-dev/cairn/store/postgres/pgtest"
)

// hangupProxy forwards TCP connections to PostgreSQL until hangup, which
// ends every one as a server going away does: an orderly end of stream,
// no reset, so the client reads io.EOF where it waits for an answer.
type hangupProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []*net.TCPConn // client, upstream, client, ...
	ended []net.Conn     // half-closed by hangup, closed at the end
}

func newHangupProxy(t *testing.T, upstream string) *hangupProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &hangupProxy{ln: ln}
	t.Cleanup(p.close)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", upstream)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c.(*net.TCPConn), u.(*net.TCPConn))
			p.mu.Unlock()
			// Each end passes on the other's end of stream, so a client
			// waiting for the server to close (pgconn's cancel request)
			// sees it.
			go func() { io.Copy(u, c); u.(*net.TCPConn).CloseWrite() }()
			go func() { io.Copy(c, u); c.(*net.TCPConn).CloseWrite() }()
		}
	}()
	return p
}

// close stops the proxy and closes every connection.
func (p *hangupProxy) close() {
	p.ln.Close()
	p.hangup()
	p.closeEnded()
}

// closeEnded closes the connections hangup half-closed: a client closing
// one waits for the server's end of it until then.
func (p *hangupProxy) closeEnded() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.ended {
		c.Close()
	}
	p.ended = nil
}

// hangup half-closes the client side (the client reads EOF, its writes
// still land and are dropped) and closes the upstream side.
func (p *hangupProxy) hangup() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, c := range p.conns {
		if i%2 == 0 {
			c.CloseWrite()
			p.ended = append(p.ended, c)
		} else {
			c.Close()
		}
	}
	p.conns = nil
}

// A connection PostgreSQL ends without an error message (a server killed,
// a proxy or a failover cutting it) is an outage as a refused connection
// is: Unavailable (503), not an internal error.
func TestLostConnectionIsUnavailable(t *testing.T) {
	sc := pgtest.NewSchema(t)
	if err := sc.Open(t).Close(); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(sc.DSN)
	if err != nil {
		t.Fatal(err)
	}
	p := newHangupProxy(t, u.Host)
	u.Host = p.ln.Addr().String()

	for name, op := range map[string]func(ctx context.Context, s *postgres.Store) error{
		"read": func(ctx context.Context, s *postgres.Store) error {
			_, err := s.ListTypes(ctx, store.TypeFilter{})
			return err
		},
		"write": func(ctx context.Context, s *postgres.Store) error {
			return s.Update(ctx, func(ctx context.Context, tx store.Tx) error {
				return tx.CreateType(ctx, cairn.Type{Path: "cap.type.a", Revision: "0.1.0"})
			})
		},
	} {
		s, err := postgres.Open(t.Context(), u.String(), postgres.WithSchema(sc.Name), postgres.WithMaxConns(1))
		if err != nil {
			t.Fatal(err)
		}
		// The pool's one connection was used a moment ago, so the pool
		// hands it out again without a ping.
		if _, err := s.LastSeq(t.Context()); err != nil {
			t.Fatalf("%s: before the hangup: %v", name, err)
		}
		p.hangup()
		if err := op(t.Context(), s); cairn.ErrorCode(err) != cairn.CodeUnavailable {
			t.Errorf("%s on a connection the server ended: %v (code %q), want Unavailable", name, err, cairn.ErrorCode(err))
		}
		p.closeEnded()
		s.Close()
	}
}
