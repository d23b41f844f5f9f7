package storagetest

import (
	"testing"

	"github.com/leasehold/leasehold/storage"
)

// testRevisions: every accepted write advances one global revision; rejected
// writes advance nothing.
func testRevisions(t *testing.T, s storage.Interface) {
	p := prefixFor(t)
	ctx := ctxFor(t)
	r0 := mustRev(t, s)
	a := mustCreate(t, s, p+"a", "1")
	if a.ModRevision <= r0 || a.CreateRevision != a.ModRevision {
		t.Fatalf("create at %d: revisions create=%d mod=%d", r0, a.CreateRevision, a.ModRevision)
	}
	if got := mustRev(t, s); got != a.ModRevision {
		t.Fatalf("CurrentRevision %d after create at %d", got, a.ModRevision)
	}
	b := mustCreate(t, s, p+"b", "1")
	a2 := mustUpdate(t, s, p+"a", "2", a.ModRevision)
	if !(b.ModRevision > a.ModRevision && a2.ModRevision > b.ModRevision) {
		t.Fatalf("revisions not global and increasing: a=%d b=%d a2=%d", a.ModRevision, b.ModRevision, a2.ModRevision)
	}
	if a2.CreateRevision != a.CreateRevision {
		t.Fatalf("update changed CreateRevision %d -> %d", a.CreateRevision, a2.CreateRevision)
	}
	before := mustRev(t, s)
	if _, err := s.Create(ctx, p+"a", []byte("x")); err == nil {
		t.Fatal("Create of existing key succeeded")
	}
	if _, err := s.Update(ctx, p+"a", []byte("x"), a.ModRevision); err == nil {
		t.Fatal("Update with stale revision succeeded")
	}
	if _, _, err := s.Delete(ctx, p+"missing", 0); err == nil {
		t.Fatal("Delete of missing key succeeded")
	}
	if got := mustRev(t, s); got != before {
		t.Fatalf("rejected writes moved the revision %d -> %d", before, got)
	}
	cr, err := s.CompactRevision(ctx)
	if err != nil || cr > before {
		t.Fatalf("CompactRevision = %d, %v; want <= current %d", cr, err, before)
	}
}

func testCreateGet(t *testing.T, s storage.Interface) {
	p := prefixFor(t)
	ctx := ctxFor(t)
	_, err := s.Get(ctx, p+"x")
	wantErr(t, "Get missing", err, storage.ErrNotFound)
	kv := mustCreate(t, s, p+"x", "hello")
	checkKV(t, "Create result", kv, p+"x", "hello", kv.ModRevision, kv.ModRevision)
	got, err := s.Get(ctx, p+"x")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	checkKV(t, "Get", got, p+"x", "hello", kv.CreateRevision, kv.ModRevision)
	_, err = s.Create(ctx, p+"x", []byte("again"))
	wantErr(t, "Create existing", err, storage.ErrKeyExists)
	got, _ = s.Get(ctx, p+"x")
	checkKV(t, "Get after failed create", got, p+"x", "hello", kv.CreateRevision, kv.ModRevision)
	// Empty values are values.
	e := mustCreate(t, s, p+"empty", "")
	got, err = s.Get(ctx, p+"empty")
	if err != nil || len(got.Value) != 0 || got.ModRevision != e.ModRevision {
		t.Fatalf("Get empty value: %+v, %v", got, err)
	}
	// The caller's buffer may be reused after the call returns.
	buf := []byte("mutable")
	m, err := s.Create(ctx, p+"buf", buf)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	copy(buf, "XXXXXXX")
	got, _ = s.Get(ctx, p+"buf")
	if string(got.Value) != "mutable" || string(m.Value) != "mutable" {
		t.Fatalf("store retained the caller's buffer: %q / %q", got.Value, m.Value)
	}
}

func testUpdateCAS(t *testing.T, s storage.Interface) {
	p := prefixFor(t)
	ctx := ctxFor(t)
	_, err := s.Update(ctx, p+"nope", []byte("v"), 1)
	wantErr(t, "Update missing", err, storage.ErrNotFound)
	kv := mustCreate(t, s, p+"k", "v1")
	kv2 := mustUpdate(t, s, p+"k", "v2", kv.ModRevision)
	checkKV(t, "Update", kv2, p+"k", "v2", kv.CreateRevision, kv2.ModRevision)
	_, err = s.Update(ctx, p+"k", []byte("v3"), kv.ModRevision)
	wantErr(t, "Update stale", err, storage.ErrConflict)
	_, err = s.Update(ctx, p+"k", []byte("v3"), 0)
	wantErr(t, "Update with revision 0", err, storage.ErrConflict)
	got, _ := s.Get(ctx, p+"k")
	checkKV(t, "Get after conflict", got, p+"k", "v2", kv.CreateRevision, kv2.ModRevision)
	kv3 := mustUpdate(t, s, p+"k", "v3", kv2.ModRevision)
	if kv3.ModRevision <= kv2.ModRevision {
		t.Fatalf("update revision %d not after %d", kv3.ModRevision, kv2.ModRevision)
	}
}

func testDelete(t *testing.T, s storage.Interface) {
	p := prefixFor(t)
	ctx := ctxFor(t)
	_, _, err := s.Delete(ctx, p+"nope", 0)
	wantErr(t, "Delete missing", err, storage.ErrNotFound)

	kv := mustCreate(t, s, p+"k", "v1")
	_, _, err = s.Delete(ctx, p+"k", kv.ModRevision+100)
	wantErr(t, "Delete stale", err, storage.ErrConflict)
	prev, rev, err := s.Delete(ctx, p+"k", kv.ModRevision)
	if err != nil {
		t.Fatalf("Delete with revision: %v", err)
	}
	checkKV(t, "Delete prev", prev, p+"k", "v1", kv.CreateRevision, kv.ModRevision)
	if rev <= kv.ModRevision || rev != mustRev(t, s) {
		t.Fatalf("Delete revision %d (created %d, current %d)", rev, kv.ModRevision, mustRev(t, s))
	}
	_, err = s.Get(ctx, p+"k")
	wantErr(t, "Get deleted", err, storage.ErrNotFound)
	_, err = s.Update(ctx, p+"k", []byte("x"), kv.ModRevision)
	wantErr(t, "Update deleted", err, storage.ErrNotFound)

	// Re-creation starts a new life with a new CreateRevision.
	again := mustCreate(t, s, p+"k", "v2")
	if again.CreateRevision <= rev {
		t.Fatalf("re-created CreateRevision %d not after deletion %d", again.CreateRevision, rev)
	}
	prev, rev2, err := s.Delete(ctx, p+"k", 0)
	if err != nil {
		t.Fatalf("unconditional Delete: %v", err)
	}
	checkKV(t, "unconditional Delete prev", prev, p+"k", "v2", again.CreateRevision, again.ModRevision)
	if rev2 <= again.ModRevision {
		t.Fatalf("Delete revision %d not after %d", rev2, again.ModRevision)
	}
}
