package clockcheck

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"time"
)

// MinBuildTime is the floor of a binary built without version control
// information (go build outside a checkout, or -buildvcs=false): no
// leasehold was built before it. .ci/build stamps vcs.time, which is
// later and therefore preferred.
var MinBuildTime = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// ErrBehind is what Behind wraps when the clock reads before its floor.
var ErrBehind = errors.New("the wall clock has not been set")

// Floor is the earliest the wall clock can truly read, and why.
type Floor struct {
	At time.Time
	// Why names what sets At: "this build" or a certificate file.
	Why string
}

// BuildFloor is the time the binary was built: its vcs.time build
// setting (the commit's time), else MinBuildTime. readBuildInfo is
// debug.ReadBuildInfo outside tests.
func BuildFloor(readBuildInfo func() (*debug.BuildInfo, bool)) Floor {
	f := Floor{At: MinBuildTime, Why: "this build"}
	bi, ok := readBuildInfo()
	if !ok {
		return f
	}
	for _, s := range bi.Settings {
		if s.Key != "vcs.time" {
			continue
		}
		if t, err := time.Parse(time.RFC3339, s.Value); err == nil && t.After(f.At) {
			f.At = t
		}
	}
	return f
}

// CertFloor is the latest NotBefore among the certificates in files (the
// first certificate of each PEM file). Files that do not exist are
// skipped: a member that has not joined yet holds none. A file that
// cannot be parsed is skipped too: loading it for TLS reports that.
func CertFloor(files ...string) Floor {
	var f Floor
	for _, name := range files {
		c, err := readCert(name)
		if err != nil || c == nil {
			continue
		}
		if c.NotBefore.After(f.At) {
			f = Floor{At: c.NotBefore, Why: "the certificate " + name}
		}
	}
	return f
}

// Latest is the latest of floors.
func Latest(floors ...Floor) Floor {
	var f Floor
	for _, g := range floors {
		if g.At.After(f.At) {
			f = g
		}
	}
	return f
}

// Behind returns nil when now is at or after the floor, else an error
// (wrapping ErrBehind) that says what the clock reads and why that is
// too early.
func (f Floor) Behind(now time.Time) error {
	if f.At.IsZero() || !now.Before(f.At) {
		return nil
	}
	return fmt.Errorf("%w: %s; waiting for the time to be set (NTP: systemd-timesyncd, chrony, ntpd)", ErrBehind, f.describe(now))
}

// Note is "" when now is at or after the floor, else what the clock reads
// and why that is too early, for a server that goes on anyway.
func (f Floor) Note(now time.Time) string {
	if f.At.IsZero() || !now.Before(f.At) {
		return ""
	}
	return "the wall clock looks unset: " + f.describe(now)
}

func (f Floor) describe(now time.Time) string {
	return fmt.Sprintf("it reads %s, before %s (%s)", now.UTC().Format(time.RFC3339), f.Why, f.At.UTC().Format(time.RFC3339))
}

// Options tune Wait; zero values take the defaults.
type Options struct {
	// Now is the wall clock; default time.Now.
	Now func() time.Time
	// Poll is how often the clock is read; default 1 s.
	Poll time.Duration
	// LogEvery is how often the wait is logged again; default 30 s.
	LogEvery time.Duration
	// Status, when set, is told why the wait goes on at each log line
	// (sd_notify's STATUS=), and "" once it is over.
	Status func(string)
}

// Wait blocks until the wall clock reaches f or ctx ends (it returns
// ctx's error then). While it waits it logs why, at once and then every
// LogEvery, and once more when the clock was set.
func Wait(ctx context.Context, f Floor, log *slog.Logger, o Options) error {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.LogEvery <= 0 {
		o.LogEvery = 30 * time.Second
	}
	err := f.Behind(o.Now())
	if err == nil {
		return nil
	}
	// The wait itself is measured on the monotonic clock: the wall clock
	// is the one that will jump.
	start, logged := time.Now(), time.Now()
	log.Warn("Waiting for the wall clock to be set before starting", "reason", err.Error())
	if o.Status != nil {
		o.Status(err.Error())
	}
	t := time.NewTicker(o.Poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if err = f.Behind(o.Now()); err == nil {
			log.Info("The wall clock was set; starting", "now", o.Now().UTC().Format(time.RFC3339),
				"waited", time.Since(start).Round(time.Second).String())
			if o.Status != nil {
				o.Status("")
			}
			return nil
		}
		if time.Since(logged) >= o.LogEvery {
			logged = time.Now()
			log.Warn("Still waiting for the wall clock to be set", "reason", err.Error(),
				"waited", time.Since(start).Round(time.Second).String())
			if o.Status != nil {
				o.Status(err.Error())
			}
		}
	}
}

// Expired returns an error naming the first certificate of files whose
// NotAfter is before now (a device off for longer than its validity);
// nil when none is, or when a file does not exist.
func Expired(now time.Time, files ...string) error {
	for _, name := range files {
		c, err := readCert(name)
		if err != nil || c == nil {
			continue
		}
		if now.After(c.NotAfter) {
			return fmt.Errorf("the certificate %s expired at %s (valid from %s): this device was off, or its clock was wrong, for longer than the certificate's validity",
				name, c.NotAfter.UTC().Format(time.RFC3339), c.NotBefore.UTC().Format(time.RFC3339))
		}
	}
	return nil
}

// readCert parses the first certificate of a PEM file; nil, nil when the
// file does not exist.
func readCert(name string) (*x509.Certificate, error) {
	data, err := os.ReadFile(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	b, _ := pem.Decode(data)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s: no PEM certificate", name)
	}
	return x509.ParseCertificate(b.Bytes)
}
