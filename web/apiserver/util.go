package apiserver

import "unsafe"

// b2s views b as a string without copying; the result must not outlive
// the request that owns b.
func b2s(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}
