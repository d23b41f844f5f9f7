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
	Summary:  "show or change the members of an embedded etcd cluster (status, members, remove NAME)",
	Run:      run,
}

const commandSynopsis = "cluster status|members|remove NAME [flags]"

const commandAbout = `Talks to a server started with --cluster-init or --join, over HTTP with the
kubeconfig (admin endpoints: the user must be allowed to read everything):
  status        the etcd leader, how many members are healthy, which server runs the
                election controller, then the members
  members       every member: name, ID, leader, health, learner, raft index, db size
  remove NAME   remove a member (a dead device: quorum is then counted without it);
                a removed member cannot come back with its old data directory. It
                needs a quorum: without one it fails within seconds, saying so`

// GetStatus reads the cluster's status from the server c talks to.
func GetStatus(ctx context.Context, c *lease.Client) (clusterapi.Status, error) {
	var st clusterapi.Status
	err := c.Do(ctx, http.MethodGet, clusterapi.StatusPath, nil, &st)
	return st, err
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
	timeout := fs.Duration("timeout", 10*time.Second, "give up after this long")
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
		st, err := GetStatus(ctx, c)
		if err != nil {
			fmt.Fprintf(stderr, "leasehold cluster: %v\n", err)
			return cli.ExitFailure
		}
		if *output == "json" {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			_ = enc.Encode(st)
			return cli.ExitOK
		}
		if rest[0] == "status" {
			healthy := 0
			for _, m := range st.Members {
				if m.Healthy {
					healthy++
				}
			}
			leader := st.Leader
			if leader == "" {
				leader = "(none: no quorum)"
			}
			controller := st.ElectionController
			switch {
			case st.ElectionControllerUnknown != "":
				controller = "(unknown: this member cannot read it without a quorum)"
			case controller == "":
				controller = "(none)"
			}
			fmt.Fprintf(stdout, "members: %d (%d healthy, quorum %d)\nleader:  %s\nthis:    %s\nelection controller: %s\n\n",
				len(st.Members), healthy, len(st.Members)/2+1, leader, st.Self, controller)
		}
		printMembers(stdout, st)
		return cli.ExitOK
	case "remove":
		if len(rest) != 2 {
			return usage("remove takes one member name")
		}
		if err := Remove(ctx, c, rest[1]); err != nil {
			fmt.Fprintf(stderr, "leasehold cluster: remove %s: %v\n", rest[1], err)
			return cli.ExitFailure
		}
		fmt.Fprintf(stdout, "removed member %s\n", rest[1])
		return cli.ExitOK
	default:
		return usage(fmt.Sprintf("unknown subcommand %q", rest[0]))
	}
}

func printMembers(w io.Writer, st clusterapi.Status) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tID\tLEADER\tHEALTHY\tLEARNER\tRAFT INDEX\tDB SIZE\tPEER URL\tERROR")
	for _, m := range st.Members {
		peer := ""
		if len(m.PeerURLs) > 0 {
			peer = m.PeerURLs[0]
		}
		fmt.Fprintf(tw, "%s\t%s\t%t\t%t\t%t\t%d\t%d\t%s\t%s\n", m.Name, m.ID, m.Leader, m.Healthy, m.Learner, m.RaftIndex, m.DBSize, peer, m.Error)
	}
	_ = tw.Flush()
}
