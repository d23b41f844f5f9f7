package run

import (
	"io"
	"strings"
	"testing"
	"time"
)

// TestValidateTimers pins the safety rule: the child must be dead (renew
// deadline + grace period) before anyone may take over (lease duration).
func TestValidateTimers(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		lease, deadline, retry, grace time.Duration
		wantErr                       string
	}{
		{15 * s, 10 * s, 2 * s, 2500 * time.Millisecond, ""},
		{3 * s, 2 * s, s / 2, s / 2, ""},
		{3 * s, 2 * s, s / 2, s, "must be less than --lease-duration"},
		{3 * s, 3 * s, s / 2, s / 2, "must be less than --lease-duration"},
		{2500 * time.Millisecond, s, s / 2, s / 2, "whole number of seconds"},
		{3 * s, s, s, s / 2, "greater than 1.2 x --retry-period"},
		{3 * s, 2 * s, 0, s / 2, "--retry-period 0s: must be positive"},
	} {
		err := validateTimers(tc.lease, tc.deadline, tc.retry, tc.grace)
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("validateTimers(%v, %v, %v, %v) = %v, want %q", tc.lease, tc.deadline, tc.retry, tc.grace, err, tc.wantErr)
		}
	}
}

// TestRunFlagsEnvTwins: environment twins fill flags, explicit flags win,
// and the default grace period is half the safety gap.
func TestRunFlagsEnvTwins(t *testing.T) {
	t.Setenv("LEASEHOLD_LEASE", "from-env")
	t.Setenv("LEASEHOLD_RENEW_DEADLINE", "9s")
	t.Setenv("LEASEHOLD_IDENTITY", "env-id")
	cfg, err := parseRunFlags([]string{"--identity", "flag-id", "--", "sh", "-c", "true"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.conn.Lease != "from-env" || cfg.Identity != "flag-id" || cfg.RenewDeadline != 9*time.Second {
		t.Errorf("lease %q identity %q deadline %v; want from-env, flag-id, 9s", cfg.conn.Lease, cfg.Identity, cfg.RenewDeadline)
	}
	if cfg.GracePeriod != 3*time.Second {
		t.Errorf("default grace period = %v, want (15s - 9s) / 2", cfg.GracePeriod)
	}
	if strings.Join(cfg.Command, " ") != "sh -c true" {
		t.Errorf("command = %q", cfg.Command)
	}
	t.Setenv("LEASEHOLD_ON_EXIT", "sometimes")
	if _, err := parseRunFlags([]string{"true"}, io.Discard); err == nil || !strings.Contains(err.Error(), "--on-exit") {
		t.Errorf("bad LEASEHOLD_ON_EXIT: err = %v", err)
	}
}
