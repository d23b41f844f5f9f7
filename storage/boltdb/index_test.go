package boltdb

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/leasehold/leasehold/storage"
)

// TestSortedBuilderMatchesPuts builds trees of sorted keys with the
// load's builder and by putting the keys in random order, and requires
// the same tree, node for node (key, priority, subtree size, shape):
// a treap's shape is fixed by its keys and priorities, so the builder
// must not change what a loaded store's index looks like.
func TestSortedBuilderMatchesPuts(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 10, 100, 5000} {
		keys := make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprintf("/registry/leases/ns-%d/lease-%d", i%7, i)
		}
		slices.Sort(keys)
		var b sortedBuilder
		for _, k := range keys {
			b.add(storage.KeyValue{Key: k, ModRevision: 1})
		}
		built := b.tree()
		var put *inode
		for _, i := range rand.Perm(n) {
			put, _ = put.put(storage.KeyValue{Key: keys[i], ModRevision: 1})
		}
		if path, diff := treeDiff(built, put, "root"); diff != "" {
			t.Fatalf("%d keys: the built tree differs from the put one at %s: %s", n, path, diff)
		}
		if built.len() != n {
			t.Fatalf("%d keys: the built tree counts %d", n, built.len())
		}
		var got []string
		built.ascend("", "", func(kv *storage.KeyValue) bool { got = append(got, kv.Key); return true })
		if !slices.Equal(got, keys) {
			t.Fatalf("%d keys: the built tree iterates %d keys, not the %d added in order", n, len(got), n)
		}
	}
}

func treeDiff(a, b *inode, path string) (string, string) {
	switch {
	case a == nil && b == nil:
		return "", ""
	case a == nil || b == nil:
		return path, fmt.Sprintf("one side is empty (built %v, put %v)", a != nil, b != nil)
	case a.kv.Key != b.kv.Key || a.prio != b.prio || a.size != b.size:
		return path, fmt.Sprintf("built %q prio %d size %d, put %q prio %d size %d", a.kv.Key, a.prio, a.size, b.kv.Key, b.prio, b.size)
	}
	if p, d := treeDiff(a.left, b.left, path+".left"); d != "" {
		return p, d
	}
	return treeDiff(a.right, b.right, path+".right")
}

// TestIndexNodeSize: a node of the index fits Go's 80-byte size class on
// 64-bit platforms (one per key: 10,000 leases kept 160 KB more in the
// 96-byte class).
func TestIndexNodeSize(t *testing.T) {
	if size := unsafe.Sizeof(inode{}); unsafe.Sizeof(uintptr(0)) == 8 && size > 80 {
		t.Errorf("an index node is %d bytes, over the 80-byte size class", size)
	}
}
