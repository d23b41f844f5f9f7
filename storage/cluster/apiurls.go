package cluster

import (
	"context"
	"encoding/json"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The members' API URLs.
//
// A member whose certificate expired while it was off renews it through
// another member's API (rejoin.go) before its own etcd starts, so it must
// know where the others serve it without asking etcd. Each member records
// the URL it serves the API at in the cluster's record (apiPrefix + its
// name) once it serves, and every member keeps the other members' URLs in
// apisFile beside its state, following the record.

// apiPrefix + a member's name is the URL it serves the API at.
const apiPrefix = trustPrefix + "api/"

// apisFile is the other members' API URLs by name (JSON), in the member's
// cluster directory.
func apisFile(p Paths) string { return filepath.Join(p.Dir, "member-apis.json") }

// AnnounceAPI records serverURL as the URL this member serves the API at
// (a loopback host, what a wildcard listener reports, is replaced by the
// member's advertised host when that is not loopback), then keeps the
// other members' URLs in the member's state file until the member closes.
// It returns at once; the work runs in the member's background.
func (s *Membership) AnnounceAPI(serverURL string) {
	m := s.m
	select {
	case <-m.done:
		return
	default:
	}
	own := apiURLFor(serverURL, m.cfg.AdvertiseClient)
	m.background.Go(func() {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-m.done:
				cancel()
			case <-ctx.Done():
			}
		}()
		for {
			pctx, pcancel := context.WithTimeout(ctx, removeTimeout)
			_, err := m.client.Put(clientv3.WithRequireLeader(pctx), apiPrefix+m.cfg.Name, own)
			pcancel()
			if err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
		m.followAPIs(ctx)
	})
}

// apiURLFor is serverURL with a loopback host replaced by the host of
// advertiseClient (the member's etcd client URL) when that is not
// loopback: other devices reach the member there.
func apiURLFor(serverURL, advertiseClient string) string {
	u, err := url.Parse(serverURL)
	if err != nil {
		return serverURL
	}
	adv, err := url.Parse(advertiseClient)
	if err != nil {
		return serverURL
	}
	if ip := net.ParseIP(u.Hostname()); (ip != nil && ip.IsLoopback()) || u.Hostname() == "localhost" {
		if host := adv.Hostname(); host != "" && host != "localhost" && !isLoopbackIP(host) {
			u.Host = net.JoinHostPort(host, u.Port())
		}
	}
	return u.String()
}

func isLoopbackIP(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// followAPIs keeps the other members' API URLs in the state file, from
// the record, until ctx ends.
func (m *Member) followAPIs(ctx context.Context) {
	for ctx.Err() == nil {
		resp, err := m.client.Get(ctx, apiPrefix, clientv3.WithPrefix(), clientv3.WithSerializable())
		if err == nil {
			m.keepAPIs(resp.Kvs)
			for wresp := range m.client.Watch(ctx, apiPrefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1)) {
				if wresp.Err() != nil {
					break
				}
				if all, err := m.client.Get(ctx, apiPrefix, clientv3.WithPrefix(), clientv3.WithSerializable()); err == nil {
					m.keepAPIs(all.Kvs)
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// keepAPIs writes the API URLs of the other members among kvs to
// apisFile when they changed.
func (m *Member) keepAPIs(kvs []*mvccpb.KeyValue) {
	urls := map[string]string{}
	for _, kv := range kvs {
		name := strings.TrimPrefix(string(kv.Key), apiPrefix)
		if name != m.cfg.Name && m.isMember(name) {
			urls[name] = string(kv.Value)
		}
	}
	if maps.Equal(loadAPIs(m.cfg.Paths), urls) {
		return
	}
	data, err := json.MarshalIndent(urls, "", "  ")
	if err == nil {
		err = WriteFile(apisFile(m.cfg.Paths), append(data, '\n'), 0o600)
	}
	if err != nil {
		m.log.Warn("Could not keep the other members' API URLs", "file", apisFile(m.cfg.Paths), "err", err)
	}
}

// loadAPIs reads apisFile (empty when it is missing or unreadable).
func loadAPIs(p Paths) map[string]string {
	urls := map[string]string{}
	if data, err := os.ReadFile(apisFile(p)); err == nil {
		_ = json.Unmarshal(data, &urls)
	}
	return urls
}

// memberAPIs are the other members' API URLs this member kept, by name.
func memberAPIs(p Paths) []string {
	kept := loadAPIs(p)
	names := slices.Sorted(maps.Keys(kept))
	urls := make([]string, 0, len(names))
	for _, n := range names {
		urls = append(urls, kept[n])
	}
	return urls
}
