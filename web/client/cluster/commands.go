package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/leasehold/leasehold/internal/cli"
	"github.com/leasehold/leasehold/internal/datadir"
	"github.com/leasehold/leasehold/storage/cluster/clusterapi"
	"github.com/leasehold/leasehold/web/client/lease"
)

// Command is "leasehold cluster".
var Command = cli.Command{
	Name:     "cluster",
	Synopsis: commandSynopsis,
	Summary:  "show or change the members of an embedded etcd cluster (status, members, remove NAME, revoke NAME, move-leader [NAME], rotate-certs, rotate-token, rotate-ca)",
	Run:      run,
}

const commandSynopsis = "cluster status|members|remove NAME|revoke NAME|move-leader [NAME]|rotate-certs|rotate-token|rotate-ca [flags]"

const commandAbout = `Talks to a server started with --cluster-init or --join, over HTTP with the
kubeconfig (admin endpoints: the user must be allowed to read everything):
  status        the etcd leader, how many members are healthy, which server runs the
                election controller, then the members
  members       every member: name, ID, leader, health, learner, raft index, db size
  remove NAME   remove a member (a dead, retired or stolen device: quorum is then
                counted without it), by name or, for a learner that never started, by
                ID. Its certificates stop working on every member's client and peer
                ports at once, open connections included, and the cluster token is
                rotated (new joins need the one now in any member's
                DATA/cluster/token): a copy of its data directory cannot read, write,
                join or peer. It needs a quorum: without one it fails within seconds,
                saying so. Right after the etcd leader's member died, it waits (up to
                --timeout, saying what it waits for) while the others elect a leader
  revoke NAME   the same for an API-only replica (--replica): its certificate is
                refused by every member from its next request on, its watches end,
                and the cluster token is rotated
  move-leader [NAME]
                hand the etcd leadership to member NAME (default: the member that
                answers fastest), as when "status" reports the leader slow; it returns
                once NAME leads (writes pause for about a round trip)
  rotate-certs  renew every member's and replica's certificate now (they renew by
                themselves at about two thirds of --cluster-cert-validity): members
                at once, replicas at their next check (within a minute); it waits
                (up to --timeout) until every device holds a certificate issued
                after the request, and lists those that do not. No restart: each
                TLS end reads its certificate per handshake, and the key stays
  rotate-token  replace the cluster token: every member writes the new one to its
                DATA/cluster/token; the old one admits no new device
  rotate-ca     replace the cluster CA, without a restart: a new CA cross-signed by
                the old one; every member signs with it and trusts both, every
                device renews under it (members at once, replicas within a minute),
                then the old CA is dropped from every trust file (its key is gone
                from every member once it holds the new one). It waits (up to
                --timeout) for each step and names the devices that lag; run it
                again to resume a rotation under way`

// GetStatus reads the cluster's status from the server c talks to.
func GetStatus(ctx context.Context, c *lease.Client) (clusterapi.Status, error) {
	var st clusterapi.Status
	err := c.Do(ctx, http.MethodGet, clusterapi.StatusPath, nil, &st)
	return st, err
}

// MoveLeader hands the etcd leadership to the member called to ("" lets
// the server pick) through the server c talks to.
func MoveLeader(ctx context.Context, c *lease.Client, to string) (clusterapi.MoveLeaderResponse, error) {
	var out clusterapi.MoveLeaderResponse
	err := c.Do(ctx, http.MethodPost, clusterapi.LeaderPath, clusterapi.MoveLeaderRequest{To: to}, &out)
	return out, err
}

// Remove removes the member called name through the server c talks to.
func Remove(ctx context.Context, c *lease.Client, name string) error {
	var out map[string]string
	return c.Do(ctx, http.MethodDelete, clusterapi.MembersPath+url.PathEscape(name), nil, &out)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runAs(ctx, commandSynopsis, commandAbout, args, stdout, stderr)
}

// runAs is run with the synopsis and description its help shows.
func runAs(ctx context.Context, synopsis, about string, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet(synopsis, about, stderr)
	kc := fs.String("kubeconfig", "", "kubeconfig `file` of a member (default $KUBECONFIG, else leasehold-data/kubeconfig)")
	output := fs.String("output", "table", "output `format`: table or json")
	fs.Alias("o", "output")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long (remove waits this long for a leader)")
	rest, err := fs.ParseInterspersed(args)
	if code, stop := fs.Stop(err); stop {
		return code
	}
	usage := func(msg string) int {
		fmt.Fprintf(stderr, "leasehold cluster: %s\nusage: leasehold %s\n", msg, strings.ReplaceAll(synopsis, "\n", "\n       leasehold "))
		return cli.ExitUsage
	}
	if len(rest) == 0 {
		return usage("missing subcommand")
	}
	if *output != "table" && *output != "json" {
		return usage("-o must be table or json")
	}
	path := *kc
	if path == "" {
		if path = os.Getenv("KUBECONFIG"); path == "" {
			path = datadir.At(datadir.Default).Kubeconfig()
		}
	}
	cfg, err := lease.LoadKubeconfig(path, "")
	if err != nil {
		fmt.Fprintf(stderr, "leasehold cluster: %v\n", err)
		return cli.ExitFailure
	}
	c, err := lease.New(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "leasehold cluster: %v\n", err)
		return cli.ExitFailure
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	switch rest[0] {
	case "status", "members":
		if len(rest) != 1 {
			return usage(rest[0] + " takes no arguments")
		}
		return showStatus(ctx, c, rest[0], *output, stdout, stderr)
	case "remove", "revoke":
		// One operation on the server: a name is a member's or a
		// replica's (storage/cluster's Membership.Remove).
		if len(rest) != 2 {
			return usage(rest[0] + " takes one name")
		}
		if err := RemoveWaiting(ctx, c, rest[1], prefixed(stderr, "leasehold cluster: "+rest[0]+" "+rest[1]+": ")); err != nil {
			fmt.Fprintf(stderr, "leasehold cluster: %s %s: %v\n", rest[0], rest[1], err)
			return cli.ExitFailure
		}
		what := "removed member"
		if rest[0] == "revoke" {
			what = "revoked replica"
		}
		fmt.Fprintf(stdout, "%s %s; its certificates are refused by every member\n"+
			"the cluster token was rotated: new joins need the one in DATA/cluster/token on any member\n", what, rest[1])
		return cli.ExitOK
	case "rotate-ca":
		if len(rest) != 1 {
			return usage(rest[0] + " takes no arguments")
		}
		return rotateCA(ctx, c, stdout, stderr)
	case "rotate-certs", "rotate-token":
		if len(rest) != 1 {
			return usage(rest[0] + " takes no arguments")
		}
		if rest[0] == "rotate-token" {
			if err := c.Do(ctx, http.MethodPost, clusterapi.RotateTokenPath, struct{}{}, &map[string]string{}); err != nil {
				fmt.Fprintf(stderr, "leasehold cluster: rotate-token: %v\n", err)
				return cli.ExitFailure
			}
			fmt.Fprintln(stdout, "the cluster token was rotated: new joins need the one now in DATA/cluster/token on any member")
			return cli.ExitOK
		}
		return rotateCerts(ctx, c, stdout, stderr)
	case "move-leader":
		if len(rest) > 2 {
			return usage("move-leader takes at most one name")
		}
		to := ""
		if len(rest) == 2 {
			to = rest[1]
		}
		resp, err := MoveLeader(ctx, c, to)
		if err != nil {
			fmt.Fprintf(stderr, "leasehold cluster: move-leader: %v\n", err)
			return cli.ExitFailure
		}
		if resp.From == resp.To {
			fmt.Fprintf(stdout, "%s leads already\n", resp.To)
		} else {
			fmt.Fprintf(stdout, "moved the etcd leadership from %s to %s\n", resp.From, resp.To)
		}
		return cli.ExitOK
	default:
		return usage(fmt.Sprintf("unknown subcommand %q", rest[0]))
	}
}

// showStatus is "cluster status" and "cluster members" (which shows the
// members' table alone), as a table or JSON.
func showStatus(ctx context.Context, c *lease.Client, what, output string, stdout, stderr io.Writer) int {
	st, err := GetStatus(ctx, c)
	if err != nil {
		fmt.Fprintf(stderr, "leasehold cluster: %v\n", err)
		return cli.ExitFailure
	}
	if output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(st)
		return cli.ExitOK
	}
	if what == "status" {
		printSummary(stdout, st)
	}
	printMembers(stdout, st)
	printStale(stdout, st)
	if what == "status" {
		printCertificates(stdout, st)
		printCA(stdout, st.CA)
		printLastSnapshot(ctx, stdout, c)
	}
	return cli.ExitOK
}

// printSummary is "cluster status"'s header above the members' table:
// voters and quorum, the raft leader, who runs the election controller,
// and a slow leader with the command that moves it.
func printSummary(stdout io.Writer, st clusterapi.Status) {
	healthy, voters := 0, 0
	for _, m := range st.Members {
		if !m.Learner {
			voters++
			if m.Healthy {
				healthy++
			}
		}
	}
	leader := st.Leader
	if leader == "" {
		leader = "(none: no quorum, or an election under way)"
	}
	controller := st.ElectionController
	switch {
	case st.ElectionControllerUnknown != "":
		controller = "(unknown: this member cannot read it without a quorum)"
	case controller == "":
		controller = "(none)"
	}
	learners := ""
	if n := len(st.Members) - voters; n > 0 {
		learners = fmt.Sprintf(" and %d learner(s)", n)
	}
	fmt.Fprintf(stdout, "members: %d voting (%d healthy, quorum %d)%s\nleader:  %s\nthis:    %s\nelection controller: %s\nquorum round trip from this member: %dms\n",
		voters, healthy, voters/2+1, learners, leader, st.Self, controller, st.QuorumRoundTripMs)
	if sl := st.SlowLeader; sl != nil {
		fmt.Fprintf(stdout, "SLOW LEADER: %s's commits are slow for %ds (quorum round trip %dms; %s answers in %dms, %s in %dms): leasehold cluster move-leader %s\n",
			sl.Leader, sl.SinceSeconds, sl.QuorumRoundTripMs, sl.Leader, sl.LeaderRoundTripMs, sl.Healthier, sl.HealthierRoundTripMs, sl.Healthier)
	}
	fmt.Fprintln(stdout)
}

// printLastSnapshot says, under the table, when the answering member
// last took its scheduled snapshot, and how it went; nothing when it
// takes none.
func printLastSnapshot(ctx context.Context, w io.Writer, c *lease.Client) {
	var snaps clusterapi.Snapshots
	if err := c.GetJSON(ctx, clusterapi.SnapshotsPath, &snaps); err != nil {
		if !lease.IsNotFound(err) {
			fmt.Fprintf(w, "\nlast snapshot of this member: unknown (%v)\n", err)
		}
		return
	}
	now := time.Now()
	last := snaps.Last
	if last == nil && len(snaps.Files) > 0 {
		f := snaps.Files[0]
		last = &clusterapi.SnapshotRun{Time: f.Time, Result: clusterapi.SnapshotOK, File: f.Name, Revision: f.Revision, SizeBytes: f.SizeBytes}
	}
	fmt.Fprintf(w, "\nlast snapshot of this member: %s\n", last.Summary(now))
	if snaps.Last != nil && snaps.Last.Result != clusterapi.SnapshotOK && snaps.LastSuccess != nil {
		fmt.Fprintf(w, "last good snapshot: %s\n", snaps.LastSuccess.Summary(now))
	}
	fmt.Fprintf(w, "snapshots kept: %d of %d in %s (leasehold backup list)\n", len(snaps.Files), snaps.Retention, snaps.Dir)
}

// printStale says, under the table, which learners do not answer and
// when they go: a joiner that died halfway leaves one, and etcd admits
// one learner at a time.
func printStale(w io.Writer, st clusterapi.Status) {
	for _, m := range st.Members {
		if m.Stale == nil {
			continue
		}
		what := "started, then lost before its promotion"
		if m.Stale.NeverStarted {
			what = "never started (its joiner died after the join)"
		}
		fmt.Fprintf(w, "\nstale learner %s (ID %s): %s; unreachable for %ds, removed by the etcd leader's member after %ds "+
			"(now: leasehold cluster remove %s). It blocks every join until then.\n",
			memberName(m), m.ID, what, m.Stale.UnreachableSeconds, m.Stale.RemovedAfterSeconds, m.ID)
	}
}

// memberName is a member's name, or what stands for a learner's before
// its member started.
func memberName(m clusterapi.Member) string {
	if m.Name == "" {
		return "(not started)"
	}
	return m.Name
}

// prefixed writes each write to w after prefix (one line per write).
func prefixed(w io.Writer, prefix string) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		if _, err := io.WriteString(w, prefix); err != nil {
			return 0, err
		}
		return w.Write(p)
	})
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func printMembers(w io.Writer, st clusterapi.Status) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tID\tLEADER\tHEALTHY\tLEARNER\tRAFT INDEX\tDB SIZE\tPEER URL\tERROR")
	for _, m := range st.Members {
		peer := ""
		if len(m.PeerURLs) > 0 {
			peer = m.PeerURLs[0]
		}
		fmt.Fprintf(tw, "%s\t%s\t%t\t%t\t%t\t%d\t%d\t%s\t%s\n", memberName(m), m.ID, m.Leader, m.Healthy, m.Learner, m.RaftIndex, m.DBSize, peer, m.Error)
	}
	_ = tw.Flush()
}

// rotateCerts asks every device to renew its certificate, then waits
// until each holds one issued after the request.
func rotateCerts(ctx context.Context, c *lease.Client, stdout, stderr io.Writer) int {
	var resp clusterapi.RotateCertsResponse
	if err := c.Do(ctx, http.MethodPost, clusterapi.RotateCertsPath, struct{}{}, &resp); err != nil {
		fmt.Fprintf(stderr, "leasehold cluster: rotate-certs: %v\n", err)
		return cli.ExitFailure
	}
	fmt.Fprintf(stdout, "rotation asked at %s; waiting for every member and replica to renew\n", resp.RequestedAt.Format(time.RFC3339))
	var pending []string
	for {
		st, err := GetStatus(ctx, c)
		if err == nil {
			pending = pending[:0]
			for _, cert := range st.Certificates {
				if cert.Issued.Before(resp.RequestedAt) {
					pending = append(pending, cert.Kind+" "+cert.Name)
				}
			}
			if len(pending) == 0 {
				printCertificates(stdout, st)
				fmt.Fprintln(stdout, "every certificate was renewed")
				return cli.ExitOK
			}
		}
		select {
		case <-ctx.Done():
			fmt.Fprintf(stderr, "leasehold cluster: rotate-certs: not renewed within --timeout: %s (a device that is off renews when it starts; see its log)\n", strings.Join(pending, ", "))
			return cli.ExitFailure
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// printCertificates lists every device's newest certificate: when it
// expires and when its holder renews it.
func printCertificates(w io.Writer, st clusterapi.Status) {
	if len(st.Certificates) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CERTIFICATE\tKIND\tCA\tNOT AFTER\tEXPIRES IN\tRENEWS AT\tWARNING")
	for _, c := range st.Certificates {
		notAfter, in, renew := "(unrecorded)", "", ""
		if !c.NotAfter.IsZero() {
			notAfter = c.NotAfter.UTC().Format(time.RFC3339)
			in = (time.Duration(c.ExpiresInSeconds) * time.Second).String()
			renew = c.RenewAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Name, c.Kind, shortID(c.CA), notAfter, in, renew, c.Warning)
	}
	_ = tw.Flush()
}
