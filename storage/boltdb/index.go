package boltdb

import (
	"hash/maphash"

	"github.com/leasehold/leasehold/storage"
)

// inode is one node of the in-memory index: a persistent treap ordered
// by key. A published tree is never modified: put and del copy the nodes
// on the path from the root to the change (O(log n) of them) and share
// the rest, so each committed round yields a new root while readers keep
// iterating the old one without any lock. Each node counts its subtree,
// so a range's size (List's Count) costs O(log n) too.
type inode struct {
	kv storage.KeyValue
	// prio and size take 32 bits each so that a node fits the 80-byte
	// size class (96 with 64 each: 160 KB more for 10,000 keys).
	prio        uint32 // heap order: a parent's prio is at least its children's
	size        int32  // nodes in this subtree
	left, right *inode
}

// prioSeed makes the priorities a fixed function of the key within the
// process, so a tree's shape depends only on its keys and a deleted key
// needs no remembered priority.
var prioSeed = maphash.MakeSeed()

func prioOf(key string) uint32 { return uint32(maphash.String(prioSeed, key)) }

func (n *inode) len() int {
	if n == nil {
		return 0
	}
	return int(n.size)
}

// get returns the value of key.
func (n *inode) get(key string) (storage.KeyValue, bool) {
	for n != nil {
		switch {
		case key < n.kv.Key:
			n = n.left
		case key > n.kv.Key:
			n = n.right
		default:
			return n.kv, true
		}
	}
	return storage.KeyValue{}, false
}

// put returns a tree with kv stored under kv.Key; added reports a new key.
// n is left unchanged.
func (n *inode) put(kv storage.KeyValue) (_ *inode, added bool) {
	if n == nil {
		return &inode{kv: kv, prio: prioOf(kv.Key), size: 1}, true
	}
	c := *n
	switch {
	case kv.Key < n.kv.Key:
		c.left, added = n.left.put(kv)
		if added {
			c.size++
		}
		if c.left.prio > c.prio {
			return c.rotateRight(), added
		}
	case kv.Key > n.kv.Key:
		c.right, added = n.right.put(kv)
		if added {
			c.size++
		}
		if c.right.prio > c.prio {
			return c.rotateLeft(), added
		}
	default:
		c.kv = kv
	}
	return &c, added
}

// rotateRight lifts c's left child above c. Both are fresh copies made by
// the put in progress, so changing them in place is safe.
func (c *inode) rotateRight() *inode {
	l := c.left
	c.left = l.right
	c.size = int32(1 + c.left.len() + c.right.len())
	l.right = c
	l.size = int32(1+l.left.len()) + c.size
	return l
}

func (c *inode) rotateLeft() *inode {
	r := c.right
	c.right = r.left
	c.size = int32(1 + c.left.len() + c.right.len())
	r.left = c
	r.size = 1 + c.size + int32(r.right.len())
	return r
}

// del returns a tree without key; removed reports whether it was there.
// n is left unchanged.
func (n *inode) del(key string) (_ *inode, removed bool) {
	if n == nil {
		return nil, false
	}
	switch {
	case key < n.kv.Key:
		l, ok := n.left.del(key)
		if !ok {
			return n, false
		}
		c := *n
		c.left, c.size = l, c.size-1
		return &c, true
	case key > n.kv.Key:
		r, ok := n.right.del(key)
		if !ok {
			return n, false
		}
		c := *n
		c.right, c.size = r, c.size-1
		return &c, true
	}
	return join(n.left, n.right), true
}

// join merges two trees whose keys are all ordered a < b, copying only
// the nodes along the seam.
func join(a, b *inode) *inode {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case a.prio > b.prio:
		c := *a
		c.right = join(a.right, b)
		c.size = a.size + b.size
		return &c
	default:
		c := *b
		c.left = join(a, b.left)
		c.size = a.size + b.size
		return &c
	}
}

// rank returns the number of keys below key.
func (n *inode) rank(key string) int {
	r := 0
	for n != nil {
		if key <= n.kv.Key {
			n = n.left
		} else {
			r += n.left.len() + 1
			n = n.right
		}
	}
	return r
}

// count returns the number of keys in [start, end); end "" means no
// upper bound.
func (n *inode) count(start, end string) int {
	hi := n.len()
	if end != "" {
		hi = n.rank(end)
	}
	return max(0, hi-n.rank(start))
}

// ascend calls fn on the keys in [start, end) in order until fn returns
// false; end "" means no upper bound.
func (n *inode) ascend(start, end string, fn func(kv *storage.KeyValue) bool) {
	// A treap's depth is O(log n) with high probability; the stack grows
	// if it is not.
	stack := make([]*inode, 0, 64)
	for n != nil {
		if n.kv.Key >= start {
			stack = append(stack, n)
			n = n.left
		} else {
			n = n.right
		}
	}
	for len(stack) > 0 {
		n = stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if end != "" && n.kv.Key >= end {
			return
		}
		if !fn(&n.kv) {
			return
		}
		for m := n.right; m != nil; m = m.left {
			stack = append(stack, m)
		}
	}
}

// sortedBuilder builds a tree from keys given in ascending order, as a
// store's load reads them: the same tree as putting them one by one (a
// treap's shape is fixed by its keys and priorities), in O(n) and with
// one node per key. Putting them copied O(log n) nodes per key: loading
// 10,000 keys left about 140,000 dead nodes strewn between the live
// ones, pages the runtime could not return to the system afterwards.
type sortedBuilder struct {
	// spine is the right spine of the tree so far, root first: a new
	// key, the greatest yet, hangs at its end below every node of higher
	// priority and takes the lower ones as its left subtree.
	spine []*inode
}

// add appends kv, whose key is above every key added before.
func (b *sortedBuilder) add(kv storage.KeyValue) {
	n := &inode{kv: kv, prio: prioOf(kv.Key)}
	var below *inode
	for len(b.spine) > 0 && b.spine[len(b.spine)-1].prio < n.prio {
		below = b.spine[len(b.spine)-1]
		b.spine = b.spine[:len(b.spine)-1]
	}
	n.left = below
	if len(b.spine) > 0 {
		b.spine[len(b.spine)-1].right = n
	}
	b.spine = append(b.spine, n)
}

// tree returns the tree of the keys added, with its subtree sizes.
func (b *sortedBuilder) tree() *inode {
	if len(b.spine) == 0 {
		return nil
	}
	root := b.spine[0]
	setSizes(root)
	return root
}

func setSizes(n *inode) int {
	if n == nil {
		return 0
	}
	n.size = int32(1 + setSizes(n.left) + setSizes(n.right))
	return int(n.size)
}
