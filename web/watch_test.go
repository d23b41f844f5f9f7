package web_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

// watchLines opens a watch and returns its lines as they arrive.
func watchLines(t *testing.T, url string, hdr ...string) (<-chan string, *http.Response) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for _, h := range hdr {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	ch := make(chan string, 16)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			ch <- sc.Text()
		}
	}()
	return ch, resp
}

func next(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case l, ok := <-ch:
		if !ok {
			t.Fatal("stream ended")
		}
		return l
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
	}
	return ""
}

func TestWatchJSON(t *testing.T) {
	base := startServer(t, nil)
	u := base + leasesPath
	start := time.Now()
	ch, resp := watchLines(t, u+"?watch=true&timeoutSeconds=2")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || resp.TransferEncoding[0] != "chunked" {
		t.Fatalf("watch response: %d %v %v", resp.StatusCode, resp.Header, resp.TransferEncoding)
	}
	// Headers arrive before any event (client-go waits for them): here
	// while the watch is open, not when its 2 s timeout ends it. (The
	// events below, made only now, arriving on this stream prove it too;
	// no fixed bound a loaded machine could miss.)
	if d := time.Since(start); d >= 2*time.Second {
		t.Errorf("headers took %v: held until the watch's timeoutSeconds=2 ended it", d)
	}
	do(t, "POST", u, `{"metadata":{"name":"w1"},"spec":{"holderIdentity":"h1"}}`)
	do(t, "PATCH", u+"/w1", `{"spec":{"holderIdentity":"h2"}}`, "Content-Type: application/merge-patch+json")
	do(t, "DELETE", u+"/w1", "")
	for _, typ := range []string{"ADDED", "MODIFIED", "DELETED"} {
		l := next(t, ch)
		if !strings.HasPrefix(l, `{"type":"`+typ+`","object":{"kind":"Lease","apiVersion":"coordination.k8s.io/v1","metadata":{"name":"w1"`) {
			t.Errorf("event %s: %s", typ, l)
		}
	}
	// timeoutSeconds ends the stream cleanly.
	select {
	case l, ok := <-ch:
		if ok {
			t.Errorf("unexpected line %s", l)
		}
	case <-time.After(5 * time.Second):
		t.Error("stream did not end at timeoutSeconds")
	}

	// The deprecated /watch/ path of one object.
	ch, _ = watchLines(t, base+"/apis/coordination.k8s.io/v1/watch/namespaces/default/leases/w2?timeoutSeconds=5")
	do(t, "POST", u, `{"metadata":{"name":"other"}}`)
	do(t, "POST", u, `{"metadata":{"name":"w2"}}`)
	if l := next(t, ch); !strings.Contains(l, `"name":"w2"`) {
		t.Errorf("named watch: %s", l)
	}
	r := do(t, "GET", base+"/apis/coordination.k8s.io/v1/watch/namespaces/default/leases/w2?fieldSelector=metadata.name%3Dzz", "")
	if r.code != 400 || !strings.Contains(r.body, "fieldSelector metadata.name doesn't match requested name") {
		t.Errorf("mismatched selector: %d %s", r.code, r.body)
	}
	// YAML has no stream serializer upstream.
	r = do(t, "GET", u+"?watch=true", "", "Accept: application/yaml")
	if r.code != 406 || r.header.Get("Content-Type") != "application/yaml" || !strings.Contains(r.body, "only the following media types are accepted: application/json;stream=watch,") {
		t.Errorf("yaml watch: %d %s", r.code, r.body)
	}
}

// TestWatchTable is kubectl get -w: the first Table has the column
// definitions, later ones "columnDefinitions":null.
func TestWatchTable(t *testing.T) {
	base := startServer(t, nil)
	u := base + leasesPath
	ch, _ := watchLines(t, u+"?watch=true&timeoutSeconds=5", "Accept: application/json;as=Table;v=v1;g=meta.k8s.io")
	do(t, "POST", u, `{"metadata":{"name":"t1"},"spec":{"holderIdentity":"h1"}}`)
	do(t, "PATCH", u+"/t1", `{"spec":{"holderIdentity":"h2"}}`, "Content-Type: application/merge-patch+json")
	first, second := next(t, ch), next(t, ch)
	if !strings.HasPrefix(first, `{"type":"ADDED","object":{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"`) ||
		!strings.Contains(first, `"columnDefinitions":[{"name":"Name","type":"string","format":"name"`) ||
		!strings.Contains(first, `"object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"t1"`) {
		t.Errorf("first: %s", first)
	}
	if !strings.Contains(second, `"columnDefinitions":null,"rows":[{"cells":["t1","h2",`) {
		t.Errorf("second: %s", second)
	}
}

// TestWatchEndsOnShutdown: Serve's context ends open watches and Serve
// returns promptly.
func TestWatchEndsOnShutdown(t *testing.T) {
	srv := newServer(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	ch, _ := watchLines(t, "http://"+ln.Addr().String()+leasesPath+"?watch=true")
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
	// Promptly: an open watch that held the drain would keep Serve for
	// its whole grace.
	const shutdownGrace = 5 * time.Second // web's drain grace
	if d := time.Since(start); d >= shutdownGrace {
		t.Errorf("shutdown took %v: the open watch held the drain until its %v grace ran out", d, shutdownGrace)
	}
	for range ch {
	}
}

// TestWatchNoLeak: watches whose clients went away are stopped once a
// write fails, and their goroutines (stream writer, engine watcher) end.
func TestWatchNoLeak(t *testing.T) {
	base := startServer(t, nil)
	u := base + leasesPath
	// The UI keeps one engine watch of its own (the holder history): it
	// starts with the server and stays, so it is the baseline.
	idle := uiHolderWatch(t)
	for range 5 {
		tr := &http.Transport{}
		resp, err := (&http.Client{Transport: tr}).Get(u + "?watch=true")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		tr.CloseIdleConnections()
	}
	if n := watchGoroutines(); n < idle+5 {
		t.Fatalf("expected the 5 watches to be running, found %d goroutines (%d idle)", n, idle)
	}
	// Events make the abandoned streams write and notice.
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; watchGoroutines() > idle && time.Now().Before(deadline); i++ {
		do(t, "POST", u, fmt.Sprintf(`{"metadata":{"name":"n%d"}}`, i))
		time.Sleep(50 * time.Millisecond)
	}
	if n := watchGoroutines() - idle; n > 0 {
		buf := make([]byte, 1<<20)
		t.Errorf("%d watch goroutines left\n%s", n, buf[:runtime.Stack(buf, true)])
	}
}

// uiHolderWatch waits for the UI's holder-history watch to run and
// returns the watch goroutines counted then.
func uiHolderWatch(t *testing.T) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		buf := make([]byte, 4<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		if strings.Contains(stacks, "engine/listwatch.Run") && strings.Contains(stacks, "engine.(*eventQueue).pump") {
			return watchGoroutines()
		}
		if time.Now().After(deadline) {
			t.Fatal("the UI's holder-history watch did not start in 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// watchGoroutines counts goroutines serving watch streams or running an
// engine watcher.
func watchGoroutines() int {
	buf := make([]byte, 4<<20)
	n := 0
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "web/apiserver.(*watchEncoder)") || strings.Contains(g, "leasehold/engine.") && strings.Contains(g, "atch") {
			n++
		}
	}
	return n
}

// TestShutdownEndsSilentConnections: a connection that has sent no request
// yet (a browser's spare connection) does not hold the drain until its
// grace runs out, while a request sent on a new connection as the drain
// starts is still answered.
func TestShutdownEndsSilentConnections(t *testing.T) {
	srv := newServer(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	addr := ln.Addr().String()
	// A request makes sure Serve is accepting before the raw connections.
	if resp, err := http.Get("http://" + addr + "/livez"); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	late, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	const shutdownGrace = 5 * time.Second // web's drain grace
	time.Sleep(100 * time.Millisecond)    // both accepted
	start := time.Now()
	cancel()
	if _, err := late.Write([]byte("GET /livez HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * shutdownGrace):
		t.Fatal("Serve did not return")
	}
	if d := time.Since(start); d >= shutdownGrace {
		t.Errorf("shutdown took %v: the silent connection held the drain until its %v grace ran out", d, shutdownGrace)
	}
	_ = late.SetReadDeadline(time.Now().Add(5 * time.Second))
	status, err := bufio.NewReader(late).ReadString('\n')
	if !strings.HasPrefix(status, "HTTP/1.1 ") {
		t.Errorf("a request sent on a new connection as the drain started got %q (%v), want an answer", status, err)
	}
}
