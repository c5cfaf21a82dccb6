package grpc

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/cairn-dev/cairn"
)

// Health is what a health check of a backend found.
type Health struct {
	// Service is the service asked about: the storage service the hub
	// calls, or "" (the server as a whole) when the backend does not
	// report on that service separately.
	Service string `json:"service"`
	// Status is the grpc.health.v1 status: SERVING, NOT_SERVING, ...
	Status string `json:"status"`
	// Connect is the time of the first check, connection set-up included.
	Connect time.Duration `json:"connect"`
	// RoundTrip is the time of a second check on the open connection.
	RoundTrip time.Duration `json:"roundTrip"`
	// TLS says whether the connection is encrypted.
	TLS bool `json:"tls"`
}

// Serving reports whether the backend is ready for calls.
func (h Health) Serving() bool {
	return h.Status == healthpb.HealthCheckResponse_SERVING.String()
}

// Check connects to a backend and asks its grpc.health.v1 service, twice, to
// measure the round-trip time on an open connection. An error means the
// backend could not be asked at all.
func (o *Opener) Check(ctx context.Context, sb cairn.StorageBackend) (Health, error) {
	c, err := o.client(sb)
	if err != nil {
		return Health{}, err
	}
	h := Health{Service: c.serviceName(), TLS: c.target.TLS}
	hc := healthpb.NewHealthClient(c.conn)
	check := func() (time.Duration, *healthpb.HealthCheckResponse, error) {
		cctx, cancel := context.WithTimeout(ctx, o.timeout)
		defer cancel()
		start := time.Now()
		resp, err := hc.Check(cctx, &healthpb.HealthCheckRequest{Service: h.Service})
		if status.Code(err) == codes.NotFound && h.Service != "" {
			// The backend reports only on the server as a whole.
			h.Service = ""
			resp, err = hc.Check(cctx, &healthpb.HealthCheckRequest{})
		}
		return time.Since(start), resp, err
	}
	var resp *healthpb.HealthCheckResponse
	if h.Connect, resp, err = check(); err != nil {
		return h, c.checkErr(err)
	}
	if h.RoundTrip, resp, err = check(); err != nil {
		return h, c.checkErr(err)
	}
	h.Status = resp.GetStatus().String()
	return h, nil
}

func (c *Client) checkErr(err error) error {
	if status.Code(err) == codes.Unimplemented {
		return backendErr(c.id, cairn.CodeUnavailable, fmt.Sprintf("health check at %s: the backend does not serve grpc.health.v1", c.target.Addr), err)
	}
	return backendErr(c.id, codeOf(status.Code(err)), "health check: "+c.describe("/grpc.health.v1.Health/Check", err), err)
}

// CheckBackend is Check in the hub's terms (hub.HealthChecker).
func (o *Opener) CheckBackend(ctx context.Context, sb cairn.StorageBackend) (cairn.BackendHealth, error) {
	h, err := o.Check(ctx, sb)
	return cairn.BackendHealth{Service: h.Service, Status: h.Status, Connect: h.Connect, RoundTrip: h.RoundTrip, TLS: h.TLS}, err
}
