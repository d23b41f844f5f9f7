// Package buildversion derives leasehold's version string for a build
// that was not given one with -ldflags -X (a plain go build or go run),
// in the form .ci/version gives a build that is not a tagged release.
//
// It is a leaf (standard library only), outside the four layers; the
// composition root uses it when -X main.Version was not given.
package buildversion
