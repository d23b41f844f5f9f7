package ui

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"path"
	"sort"
	"strings"
	"sync"

	"github.com/valyala/fasthttp"
)

//go:embed static
var static embed.FS

// assetPlaceholder in index.html becomes the hashed asset prefix.
const assetPlaceholder = "{{ASSETS}}"

// asset is one file, ready to send.
type asset struct {
	body        []byte
	contentType string
	// The gzip form is made on first request: compressing every file at
	// start-up (a compressor's state is about a megabyte) grew the heap
	// that an idle server keeps.
	gzOnce *sync.Once
	gzBody *[]byte // nil when compressing does not pay
}

// gz returns the compressed body, or nil when compressing does not pay.
func (f asset) gz() []byte {
	f.gzOnce.Do(func() {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.Write(f.body)
		zw.Close()
		if buf.Len() < len(f.body)*9/10 {
			*f.gzBody = buf.Bytes()
		}
	})
	return *f.gzBody
}

// assets holds the embedded files. One hash covers all of them and is part
// of every asset URL: modules import each other by relative path, so they
// all live under the same hashed directory and an upgrade can never mix
// old and new files from a browser cache.
type assets struct {
	prefix string // "/ui/a/<hash>/"
	hash   string
	index  asset
	files  map[string]asset
}

func loadAssets() (*assets, error) {
	root, err := fs.Sub(static, "static")
	if err != nil {
		return nil, fmt.Errorf("ui: %w", err)
	}
	raw := map[string][]byte{}
	err = fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(root, p)
		raw[p] = b
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ui: reading assets: %w", err)
	}
	names := make([]string, 0, len(raw))
	for n := range raw {
		names = append(names, n)
	}
	sort.Strings(names)
	sum := sha256.New()
	for _, n := range names {
		fmt.Fprintf(sum, "%s\x00%d\x00", n, len(raw[n]))
		sum.Write(raw[n])
	}
	a := &assets{hash: hex.EncodeToString(sum.Sum(nil))[:16], files: map[string]asset{}}
	a.prefix = "/ui/a/" + a.hash + "/"
	for _, n := range names {
		if n == "index.html" {
			continue
		}
		a.files[n] = newAsset(n, raw[n])
	}
	idx, ok := raw["index.html"]
	if !ok {
		return nil, fmt.Errorf("ui: index.html is not embedded")
	}
	a.index = newAsset("index.html", bytes.ReplaceAll(idx, []byte(assetPlaceholder), []byte(a.prefix)))
	return a, nil
}

func newAsset(name string, body []byte) asset {
	var ct string
	switch path.Ext(name) { // the OS mime table may lack or differ on these
	case ".js":
		ct = "text/javascript; charset=utf-8"
	case ".css":
		ct = "text/css; charset=utf-8"
	case ".html":
		ct = "text/html; charset=utf-8"
	case ".svg":
		ct = "image/svg+xml"
	default: // loading the OS table costs a megabyte and a half of heap
		ct = mime.TypeByExtension(path.Ext(name))
	}
	if ct == "" {
		ct = "application/octet-stream"
	}
	return asset{body: body, contentType: ct, gzOnce: new(sync.Once), gzBody: new([]byte)}
}

// serveIndex sends index.html, which must never be cached: it names the
// current asset hash.
func (a *assets) serveIndex(rc *fasthttp.RequestCtx) {
	rc.Response.Header.Set("Cache-Control", "no-cache")
	a.send(rc, a.index)
}

// serve sends "<hash>/<file>". Another hash is a stale page asking for an
// old build's files: 404, and its reload fetches the new index.
func (a *assets) serve(rc *fasthttp.RequestCtx, rest string) {
	hash, name, ok := strings.Cut(rest, "/")
	f, found := a.files[name]
	if !ok || hash != a.hash || !found {
		plain(rc, fasthttp.StatusNotFound, "404 page not found")
		return
	}
	rc.Response.Header.Set("Cache-Control", "public, max-age=31536000, immutable")
	a.send(rc, f)
}

func (a *assets) send(rc *fasthttp.RequestCtx, f asset) {
	rc.SetContentType(f.contentType)
	rc.Response.Header.Set("Vary", "Accept-Encoding")
	if rc.Request.Header.HasAcceptEncoding("gzip") {
		if gz := f.gz(); gz != nil {
			rc.Response.Header.Set("Content-Encoding", "gzip")
			rc.SetBody(gz)
			return
		}
	}
	rc.SetBody(f.body)
}

// Size reports the uncompressed and gzip-compressed size of all assets.
func (h *Handler) Size() (raw, gz int) {
	for _, f := range append([]asset{h.assets.index}, mapValues(h.assets.files)...) {
		raw += len(f.body)
		if z := f.gz(); z != nil {
			gz += len(z)
		} else {
			gz += len(f.body)
		}
	}
	return raw, gz
}

func mapValues(m map[string]asset) []asset {
	out := make([]asset, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
