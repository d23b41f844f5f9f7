package leasecodec

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestLeaseJSONRaw checks the GET fast path end to end: a stored lease
// rendered by StoredJSON is byte for byte the serializer's JSON of the
// decoded lease, as the decoded path would answer.
func TestLeaseJSONRaw(t *testing.T) {
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
	taken := 0
	for i := range 2000 {
		l := randomLease(r, encodeStrings)
		if r.IntN(3) == 0 {
			l.Labels = map[string]string{"a": "1", "c/d": "x"}
			l.Annotations = map[string]string{"note": "y"}
		}
		rev := int64(i + 1)
		got, ok := StoredJSON(stored(t, l), rev)
		if !ok {
			continue
		}
		taken++
		want := l.DeepCopy()
		want.TypeMeta = metav1.TypeMeta{Kind: "Lease", APIVersion: "coordination.k8s.io/v1"}
		want.ResourceVersion = strconv.FormatInt(rev, 10)
		if slow := serializerJSON(t, want); !bytes.Equal(got, slow) {
			t.Fatalf("GET bodies differ\nraw:        %s\nserializer: %s", got, slow)
		}
	}
	if taken < 1000 {
		t.Fatalf("only %d of 2000 random leases took the fast path", taken)
	}
	// A renewal-shaped lease always does.
	now := metav1.NewMicroTime(time.Date(2026, 11, 21, 10, 0, 0, 123456000, time.UTC))
	typical := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "kcm", Namespace: "kube-system", UID: "u"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptrTo("a"), LeaseDurationSeconds: ptrTo(int32(15)), RenewTime: &now}}
	if _, ok := StoredJSON(stored(t, typical), 9); !ok {
		t.Fatal("a typical lease did not take the GET fast path")
	}
}
