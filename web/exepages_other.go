//go:build !linux

package web

// releaseExecutablePages is Linux-only (see exepages_linux.go).
func releaseExecutablePages() {}
