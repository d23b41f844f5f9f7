package cluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/leasehold/leasehold/internal/cli"
	"github.com/leasehold/leasehold/storage/cluster/clusterapi"
	"github.com/leasehold/leasehold/web/client/lease"
)

// rotateCA runs a CA rotation to its end, or resumes the one under way:
// it starts it (or finds it), waits until every device holds a
// certificate of the new CA, finishes it, then waits until every member
// dropped the old CA from its trust. Each wait is bounded by ctx
// (--timeout), and names what it still waits for.
func rotateCA(ctx context.Context, c *lease.Client, stdout, stderr io.Writer) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(stderr, "leasehold cluster: rotate-ca: "+format+"\n", args...)
		return cli.ExitFailure
	}
	st, err := GetStatus(ctx, c)
	if err != nil {
		return fail("%v", err)
	}
	ca := st.CA
	switch {
	case ca != nil && ca.Phase == clusterapi.CAPhaseReissue:
		fmt.Fprintf(stdout, "resuming the CA rotation started at %s: new CA %s\n", ca.Started.Format(time.RFC3339), shortID(ca.Current.ID))
	case ca != nil && ca.Phase == clusterapi.CAPhaseDone && len(undropped(st)) > 0:
		fmt.Fprintf(stdout, "resuming the CA rotation finished at %s: waiting for every member to drop the old CA\n", ca.Finished.Format(time.RFC3339))
	default:
		var started clusterapi.CAStatus
		if err := c.Do(ctx, http.MethodPost, clusterapi.RotateCAPath, clusterapi.RotateCARequest{}, &started); err != nil {
			return fail("%v", err)
		}
		old := ""
		if started.Old != nil {
			old = shortID(started.Old.ID)
		}
		fmt.Fprintf(stdout, "CA rotation started at %s: new CA %s replaces %s; every member signs with it and trusts both, every device renews under it\n",
			started.Started.Format(time.RFC3339), shortID(started.Current.ID), old)
		ca = &started
	}
	if ca.Phase == clusterapi.CAPhaseReissue {
		var waiting []string
		for {
			st, err = GetStatus(ctx, c)
			if err == nil && st.CA != nil {
				waiting = slices.Clone(st.CA.Lagging)
				for _, u := range untrusting(st) {
					if !slices.Contains(waiting, "member "+u) {
						waiting = append(waiting, "member "+u+" (does not trust the new CA yet)")
					}
				}
				if len(waiting) == 0 {
					var done clusterapi.CAStatus
					err = c.Do(ctx, http.MethodPost, clusterapi.RotateCAPath, clusterapi.RotateCARequest{Finish: true}, &done)
					if err == nil {
						fmt.Fprintf(stdout, "every device holds a certificate of the new CA; the old CA is dropped\n")
						break
					}
					if _, again := tryAgain(err); !again && !lease.IsConflict(err) {
						return fail("finish: %v", err)
					}
					waiting = []string{err.Error()}
				}
			}
			select {
			case <-ctx.Done():
				return fail("not every device was re-issued within --timeout: %s (a device that is off renews when it starts, a replica within a minute; "+
					"one that will not come back is removed with cluster remove; run rotate-ca again to resume)", strings.Join(waiting, ", "))
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
	var pending []string
	for {
		st, err = GetStatus(ctx, c)
		if err == nil {
			if pending = undropped(st); len(pending) == 0 {
				printCertificates(stdout, st)
				printCA(stdout, st.CA)
				fmt.Fprintln(stdout, "the CA rotation is done: every member trusts the new CA only (replicas follow at their next check)")
				return cli.ExitOK
			}
		}
		select {
		case <-ctx.Done():
			return fail("the old CA is still in the trust of: %s (a member that is off drops it when it starts; run rotate-ca again to wait)", strings.Join(pending, ", "))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// untrusting names the members that have not applied the rotation under
// way yet.
func untrusting(st clusterapi.Status) []string {
	var out []string
	for _, m := range st.CA.Members {
		if m.Phase != clusterapi.CAPhaseReissue || !slices.Contains(m.Trusts, st.CA.Current.ID) {
			out = append(out, m.Name)
		}
	}
	return out
}

// undropped names the members whose trust still holds a CA other than
// the current one after a rotation.
func undropped(st clusterapi.Status) []string {
	if st.CA == nil || st.CA.Phase != clusterapi.CAPhaseDone {
		return []string{"(the rotation is not done)"}
	}
	var out []string
	for _, m := range st.CA.Members {
		if m.Phase != clusterapi.CAPhaseDone || len(m.Trusts) != 1 || m.Trusts[0] != st.CA.Current.ID {
			out = append(out, "member "+m.Name)
		}
	}
	return out
}

// printCA shows the cluster CA under the certificates: the one members
// sign with, and during or after a rotation its phase and each member's
// part.
func printCA(w io.Writer, ca *clusterapi.CAStatus) {
	if ca == nil {
		return
	}
	fmt.Fprintf(w, "\ncluster CA: %s (%s, until %s)\n", shortID(ca.Current.ID), ca.Current.Subject, ca.Current.NotAfter.Format(time.RFC3339))
	switch ca.Phase {
	case "":
		return
	case clusterapi.CAPhaseReissue:
		old := ""
		if ca.Old != nil {
			old = fmt.Sprintf(" replacing %s (%s)", shortID(ca.Old.ID), ca.Old.Subject)
		}
		fmt.Fprintf(w, "CA rotation: reissue since %s%s; not re-issued yet: %s (leasehold cluster rotate-ca resumes it)\n",
			ca.Started.Format(time.RFC3339), old, orNone(ca.Lagging))
	case clusterapi.CAPhaseDone:
		fmt.Fprintf(w, "CA rotation: done at %s (started %s)\n", ca.Finished.Format(time.RFC3339), ca.Started.Format(time.RFC3339))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tPHASE APPLIED\tSIGNS WITH\tTRUSTS")
	for _, m := range ca.Members {
		phase := m.Phase
		if phase == "" {
			phase = "(not yet)"
		}
		trusts := make([]string, len(m.Trusts))
		for i, t := range m.Trusts {
			trusts[i] = shortID(t)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.Name, phase, shortID(m.Signs), strings.Join(trusts, ","))
	}
	_ = tw.Flush()
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "(none)"
	}
	return strings.Join(s, ", ")
}

// shortID is a CA ID's first 12 hexadecimal digits ("" stays empty).
func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
