package backend

import (
	"fmt"
	"time"

	"github.com/leasehold/leasehold/internal/clockcheck"
	"github.com/leasehold/leasehold/internal/datadir"
	"github.com/leasehold/leasehold/storage/cluster"
)

// CertFiles are the certificates a member or replica holds in dir (none on
// other storage): their NotBefore is a floor of the wall clock
// (clockcheck.CertFloor).
func (m Mode) CertFiles(dir datadir.Layout) []string {
	switch m {
	case Member:
		c := dir.Member()
		return []string{c.CAFile, c.CertFile}
	case Replica:
		r := dir.Replica()
		return []string{r.CAFile, r.CertFile}
	}
	return nil
}

// CheckExpired refuses to start a member or replica whose cluster CA
// expired while the device was off, saying what to do, instead of letting
// its peers' handshakes fail (docs/cluster.md, "Clocks"). Its own
// certificate having expired is not refused here: it renews it with the
// cluster token before it starts (storage/cluster's rejoin.go).
func (m Mode) CheckExpired(dir datadir.Layout, now time.Time) error {
	switch m {
	case Member:
		c := dir.Member()
		if err := clockcheck.Expired(now, c.CAFile); err != nil {
			name := "NAME"
			if st, err := cluster.LoadState(c); err == nil {
				name = st.Name
			}
			return fmt.Errorf("%w; the other members refuse it. To bring the device back: on another member, "+
				"\"leasehold cluster remove %s\" (it rotates the cluster token); here, move %s aside and start again "+
				"with --join URL --cluster-token-file and the new token (that member's cluster/token); docs/cluster.md, \"Clocks\"", err, name, c.Dir)
		}
	case Replica:
		r := dir.Replica()
		if err := clockcheck.Expired(now, r.CAFile); err != nil {
			return fmt.Errorf("%w; the members refuse it. To bring the replica back: \"leasehold cluster revoke NAME\" on a member, "+
				"move %s aside and start again with --replica --join URL and the new cluster token; docs/cluster.md, \"Clocks\"", err, r.Dir)
		}
	}
	return nil
}
