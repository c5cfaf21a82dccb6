package cli

import (
	"net"
	"strconv"
	"time"
)

// checkServeFlags refuses serve's flag values it cannot use, before the
// store is opened (opening migrates it): a duration that must be positive
// and is not used to be taken silently as its default, a negative one as
// zero, so the server ran with settings other than those it was given.
func checkServeFlags(addr string, shutdownTimeout time.Duration, gitSync gitSyncOptions, stacks stackControllerOptions, rec recoveryOptions, sec *securityOptions) error {
	if err := checkListenAddr(addr); err != nil {
		return err
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{
		{"--recovery-interval", rec.interval},
		{"--recovery-grace", rec.grace},
		{"--stack-resync", stacks.resync},
		{"--stack-lease-duration", stacks.lease},
	} {
		if d.v <= 0 {
			return usageErrorf("%s %s: must be positive", d.flag, d.v)
		}
	}
	if shutdownTimeout < 0 {
		return usageErrorf("--shutdown-timeout %s: must not be negative", shutdownTimeout)
	}
	if gitSync.interval < 0 {
		return usageErrorf("--git-sync-interval %s: must not be negative (0: only on POST /hooks/git/{backend})", gitSync.interval)
	}
	if sec.ratePerUser < 0 {
		return usageErrorf("--max-requests-per-user %s: must not be negative (0: no limit)", strconv.FormatFloat(sec.ratePerUser, 'g', -1, 64))
	}
	if sec.burst < 0 {
		return usageErrorf("--max-requests-burst %d: must not be negative", sec.burst)
	}
	if sec.ratePerUser > 0 && sec.burst < 1 {
		return usageErrorf("--max-requests-burst %d: must be at least 1 with --max-requests-per-user", sec.burst)
	}
	if sec.auditMaxMB <= 0 {
		return usageErrorf("--audit-log-maxsize %d: must be a positive number of megabytes", sec.auditMaxMB)
	}
	if sec.auditBackups < 0 {
		return usageErrorf("--audit-log-maxbackup %d: must not be negative", sec.auditBackups)
	}
	if sec.oidc.IssuerURL != "" && sec.oidc.ClientID == "" {
		return usageErrorf("--oidc-issuer-url %s needs --oidc-client-id (the audience its ID tokens are issued for)", sec.oidc.IssuerURL)
	}
	if _, err := parseAuditLevel(sec.auditLevel); err != nil {
		return err
	}
	return nil
}

// checkListenAddr checks what net.Listen would refuse only after the
// store was opened: a missing or out-of-range port, or an unknown service
// name.
func checkListenAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return usageErrorf("--addr %q: %v", addr, err)
	}
	if n, err := strconv.Atoi(port); err == nil {
		if n < 0 || n > 65535 {
			return usageErrorf("--addr %q: port %d is out of range (0-65535)", addr, n)
		}
		return nil
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return usageErrorf("--addr %q: port %q: %v", addr, port, err)
	}
	return nil
}
