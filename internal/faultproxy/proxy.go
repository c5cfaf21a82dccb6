// Package faultproxy is a TCP proxy for fault-injection tests: put it
// between a client and a server (the hub and a gRPC backend, replicas and
// PostgreSQL) and make the network pass, delay, black-hole or reset
// connections while real processes talk through it.
package faultproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Mode is what the proxy does to traffic.
type Mode int

const (
	// Pass forwards everything.
	Pass Mode = iota
	// Delay holds every chunk for the proxy's delay before forwarding it.
	Delay
	// Blackhole accepts connections and reads, but forwards nothing: calls
	// hang until their deadline.
	Blackhole
	// Refuse resets new connections at once.
	Refuse
)

// Proxy forwards connections from its listener to an upstream address.
type Proxy struct {
	ln       net.Listener
	upstream string

	mu    sync.Mutex
	mode  Mode
	delay time.Duration
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// New listens on a free loopback port and forwards to upstream.
func New(upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, upstream: upstream, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Set changes the mode (and, for Delay, the delay) for traffic from now on.
func (p *Proxy) Set(m Mode, delay time.Duration) {
	p.mu.Lock()
	p.mode, p.delay = m, delay
	p.mu.Unlock()
}

// Reset cuts every open connection with a TCP RST, as a crashed peer or a
// middlebox would; the peers see "connection reset".
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = c.Close()
		delete(p.conns, c)
	}
}

// Close stops listening and cuts every connection.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.Reset()
	p.wg.Wait()
	return err
}

func (p *Proxy) state() (Mode, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode, p.delay
}

func (p *Proxy) track(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if m, _ := p.state(); m == Refuse {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			c.Close()
			continue
		}
		up, err := net.DialTimeout("tcp", p.upstream, 5*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		p.track(c, up)
		p.wg.Add(2)
		go p.pipe(up, c)
		go p.pipe(c, up)
	}
}

// pipe copies src to dst chunk by chunk, applying the mode to each.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer func() {
		dst.Close()
		src.Close()
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			switch m, d := p.state(); m {
			case Blackhole:
				continue
			case Delay:
				time.Sleep(d)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return
			}
			if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
			return
		}
	}
}
