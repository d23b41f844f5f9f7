package lease

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Event types of a watch stream (metav1.WatchEvent.Type).
const (
	Added    = "ADDED"
	Modified = "MODIFIED"
	Deleted  = "DELETED"
	Bookmark = "BOOKMARK"
)

// Event is one decoded watch event about a T.
type Event[T any] struct {
	Type   string
	Object *T
}

// Watch is an open watch stream. Next blocks for the next event; it returns
// an error when the stream ends (io.EOF when the server closed it, a
// *StatusError for an ERROR event such as 410 Gone, or the context's
// error). Close releases the connection.
type Watch[T any] struct {
	body io.ReadCloser
	dec  *json.Decoder
}

// Next returns the next event. Bookmarks are returned too (with an object
// carrying only a resourceVersion) so that callers can resume from them.
func (w *Watch[T]) Next() (Event[T], error) {
	var raw struct {
		Type   string          `json:"type"`
		Object json.RawMessage `json:"object"`
	}
	if err := w.dec.Decode(&raw); err != nil {
		return Event[T]{}, err
	}
	if raw.Type == "ERROR" {
		var st metav1.Status
		if err := json.Unmarshal(raw.Object, &st); err != nil {
			return Event[T]{}, fmt.Errorf("decode watch error: %w", err)
		}
		return Event[T]{}, &StatusError{Code: int(st.Code), Status: st}
	}
	obj := new(T)
	if err := json.Unmarshal(raw.Object, obj); err != nil {
		return Event[T]{}, fmt.Errorf("decode watch event: %w", err)
	}
	return Event[T]{Type: raw.Type, Object: obj}, nil
}

// Close ends the stream.
func (w *Watch[T]) Close() error { return w.body.Close() }

// ListMeta is what a one-object list tells a watcher: the object (nil if
// absent) and the list's resourceVersion to watch from.
type ListMeta[T any] struct {
	Object          *T
	ResourceVersion string
}

// GetLeaseForWatch lists the Lease named name (0 or 1 items) so that a
// watch can start from the list's resourceVersion without missing changes.
func (c *Client) GetLeaseForWatch(ctx context.Context, ns, name string) (ListMeta[coordinationv1.Lease], error) {
	var list coordinationv1.LeaseList
	err := c.do(ctx, http.MethodGet, c.url(leases, ns, "", nameSelector(name, nil)), nil, &list)
	out := ListMeta[coordinationv1.Lease]{ResourceVersion: list.ResourceVersion}
	if len(list.Items) > 0 {
		out.Object = &list.Items[0]
	}
	return out, err
}

// GetCandidateForWatch is GetLeaseForWatch for a LeaseCandidate.
func (c *Client) GetCandidateForWatch(ctx context.Context, ns, name string) (ListMeta[coordinationv1beta1.LeaseCandidate], error) {
	var list coordinationv1beta1.LeaseCandidateList
	err := c.do(ctx, http.MethodGet, c.url(candidates, ns, "", nameSelector(name, nil)), nil, &list)
	out := ListMeta[coordinationv1beta1.LeaseCandidate]{ResourceVersion: list.ResourceVersion}
	if len(list.Items) > 0 {
		out.Object = &list.Items[0]
	}
	return out, err
}

// WatchLease watches the Lease named name from resourceVersion rv, for at
// most timeoutSeconds (the server then ends the stream cleanly).
func (c *Client) WatchLease(ctx context.Context, ns, name, rv string, timeoutSeconds int) (*Watch[coordinationv1.Lease], error) {
	return openWatch[coordinationv1.Lease](ctx, c, c.url(leases, ns, "", watchQuery(name, rv, timeoutSeconds)))
}

// WatchCandidate watches the LeaseCandidate named name from rv.
func (c *Client) WatchCandidate(ctx context.Context, ns, name, rv string, timeoutSeconds int) (*Watch[coordinationv1beta1.LeaseCandidate], error) {
	return openWatch[coordinationv1beta1.LeaseCandidate](ctx, c, c.url(candidates, ns, "", watchQuery(name, rv, timeoutSeconds)))
}

func nameSelector(name string, q url.Values) url.Values {
	if q == nil {
		q = url.Values{}
	}
	q.Set("fieldSelector", "metadata.name="+name)
	return q
}

func watchQuery(name, rv string, timeoutSeconds int) url.Values {
	q := nameSelector(name, nil)
	q.Set("watch", "true")
	q.Set("allowWatchBookmarks", "true")
	if rv != "" {
		q.Set("resourceVersion", rv)
	}
	if timeoutSeconds > 0 {
		q.Set("timeoutSeconds", strconv.Itoa(timeoutSeconds))
	}
	return q
}

func openWatch[T any](ctx context.Context, c *Client, u string) (*Watch[T], error) {
	req, err := c.newRequest(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.watch.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, decodeStatus(resp.StatusCode, data)
	}
	return &Watch[T]{body: resp.Body, dec: json.NewDecoder(resp.Body)}, nil
}
