package web_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/leasehold/leasehold/engine"
)

const protobufType = "application/vnd.kubernetes.protobuf"

func protobufInfo(t testing.TB) runtime.SerializerInfo {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(engine.Codecs.SupportedMediaTypes(), protobufType)
	if !ok {
		t.Fatal("no protobuf serializer")
	}
	return info
}

// TestProtobufRoundTrip sends what client-go's typed clients send: a
// protobuf Lease with the k8s\0 envelope, accepting protobuf first.
func TestProtobufRoundTrip(t *testing.T) {
	base := startServer(t, nil)
	info := protobufInfo(t)
	enc := engine.Codecs.EncoderForVersion(info.Serializer, coordinationv1.SchemeGroupVersion)
	now := metav1.NewMicroTime(time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC))
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "pb"},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptrTo("me"), LeaseDurationSeconds: ptrTo[int32](15), RenewTime: &now,
		},
	}
	var body bytes.Buffer
	if err := enc.Encode(lease, &body); err != nil {
		t.Fatal(err)
	}
	r := do(t, "POST", base+leasesPath, body.String(),
		"Content-Type: "+protobufType, "Accept: application/vnd.kubernetes.protobuf, application/json")
	if r.code != 201 || r.header.Get("Content-Type") != protobufType || !strings.HasPrefix(r.body, "k8s\x00") {
		t.Fatalf("create: %d %v %q", r.code, r.header, r.body)
	}
	obj, gvk, err := info.Serializer.Decode([]byte(r.body), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := obj.(*coordinationv1.Lease)
	if !ok || gvk.Kind != "Lease" || *got.Spec.HolderIdentity != "me" || !got.Spec.RenewTime.Equal(&now) || got.ResourceVersion == "" {
		t.Fatalf("decoded %v %#v", gvk, obj)
	}

	// Errors come back as protobuf Status when protobuf is accepted.
	r = do(t, "POST", base+leasesPath, body.String(), "Content-Type: "+protobufType, "Accept: "+protobufType)
	obj, _, err = info.Serializer.Decode([]byte(r.body), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st, ok := obj.(*metav1.Status); r.code != 409 || !ok || st.Reason != metav1.StatusReasonAlreadyExists {
		t.Errorf("conflict: %d %#v", r.code, obj)
	}

	// A protobuf DELETE body (DeleteOptions).
	var opts bytes.Buffer
	if err := engine.Codecs.EncoderForVersion(info.Serializer, coordinationv1.SchemeGroupVersion).Encode(
		&metav1.DeleteOptions{PropagationPolicy: ptrTo(metav1.DeletePropagationBackground)}, &opts); err != nil {
		t.Fatal(err)
	}
	r = do(t, "DELETE", base+leasesPath+"/pb", opts.String(), "Content-Type: "+protobufType, "Accept: "+protobufType)
	if r.code != 200 {
		t.Errorf("delete: %d %q", r.code, r.body)
	}
}

// TestProtobufWatch reads length-delimited WatchEvent frames.
func TestProtobufWatch(t *testing.T) {
	base := startServer(t, nil)
	info := protobufInfo(t)
	req, _ := http.NewRequest("GET", base+leasesPath+"?watch=true&timeoutSeconds=5", nil)
	req.Header.Set("Accept", protobufType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != protobufType+";stream=watch" {
		t.Fatalf("content type %q", ct)
	}
	do(t, "POST", base+leasesPath, `{"metadata":{"name":"w"}}`)
	var n [4]byte
	if _, err := io.ReadFull(resp.Body, n[:]); err != nil {
		t.Fatal(err)
	}
	frame := make([]byte, binary.BigEndian.Uint32(n[:]))
	if _, err := io.ReadFull(resp.Body, frame); err != nil {
		t.Fatal(err)
	}
	var ev metav1.WatchEvent
	if err := ev.Unmarshal(frame); err != nil {
		t.Fatal(err)
	}
	obj, _, err := info.Serializer.Decode(ev.Object.Raw, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := obj.(*coordinationv1.Lease); ev.Type != "ADDED" || !ok || l.Name != "w" {
		t.Errorf("event %s %#v", ev.Type, obj)
	}
}

func ptrTo[T any](v T) *T { return &v }
