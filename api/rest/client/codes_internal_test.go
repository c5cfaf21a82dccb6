package client

import (
	"net/http"
	"testing"

	"github.com/cairn-dev/cairn"
)

// An HTTP status maps to the hub's code, which the CLI's exit code follows.
func TestCodeForHTTP(t *testing.T) {
	for _, tc := range []struct {
		status int
		reason string
		want   cairn.Code
	}{
		{http.StatusConflict, "AlreadyExists", cairn.CodeAlreadyExists},
		{http.StatusNotFound, "NotFound", cairn.CodeNotFound},
		{http.StatusConflict, "Conflict", cairn.CodeConflict},
		{http.StatusUnprocessableEntity, "Invalid", cairn.CodeInvalid},
		{http.StatusBadRequest, "BadRequest", cairn.CodeInvalid},
		{http.StatusGone, "Expired", cairn.CodeGone},
		{http.StatusForbidden, "Forbidden", cairn.CodeForbidden},
		{http.StatusUnauthorized, "Unauthorized", cairn.CodeForbidden},
		{http.StatusServiceUnavailable, "ServiceUnavailable", cairn.CodeUnavailable},
		{http.StatusGatewayTimeout, "Timeout", cairn.CodeUnavailable},
		{http.StatusBadGateway, "", cairn.CodeUnavailable}, // a proxy that cannot reach the server
		{http.StatusInternalServerError, "InternalError", cairn.CodeInternal},
	} {
		if got := codeForHTTP(tc.status, tc.reason); got != tc.want {
			t.Errorf("codeForHTTP(%d, %q) = %s, want %s", tc.status, tc.reason, got, tc.want)
		}
	}
}
