package lease

import (
	"context"
	"fmt"
	"io"
	"net/http"
)

// Download GETs path (e.g. /leasehold/v1/backup) and copies the body to w,
// without a timeout: it is meant for large, streamed answers. A non-2xx
// answer is returned as a *StatusError.
func (c *Client) Download(ctx context.Context, path string, w io.Writer) (int64, error) {
	n, _, err := c.DownloadWithHeader(ctx, path, w)
	return n, err
}

// DownloadWithHeader is Download that also returns the answer's header.
func (c *Client) DownloadWithHeader(ctx context.Context, path string, w io.Writer) (int64, http.Header, error) {
	req, err := c.newRequest(ctx, http.MethodGet, c.base.String()+path, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", "application/octet-stream, application/json")
	resp, err := c.watch.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return 0, resp.Header, decodeStatus(resp.StatusCode, data)
	}
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, resp.Header, fmt.Errorf("GET %s: %w", path, err)
	}
	return n, resp.Header, nil
}

// GetJSON GETs path (e.g. /ui/api/v1/system) and decodes the JSON answer
// into out. A non-2xx answer is returned as a *StatusError.
func (c *Client) GetJSON(ctx context.Context, path string, out any) error {
	return c.do(ctx, http.MethodGet, c.base.String()+path, nil, out)
}

// Do sends method to path (e.g. DELETE /leasehold/v1/cluster/members/m2)
// with body JSON-encoded (nil: none) and decodes a 2xx JSON answer into
// out. A non-2xx answer is returned as a *StatusError.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	return c.do(ctx, method, c.base.String()+path, body, out)
}
