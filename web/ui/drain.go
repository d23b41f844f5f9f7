package ui

import "github.com/valyala/fasthttp"

// Drain actions. The page drains and undrains through the server's drain
// endpoints (/leasehold/v1/namespaces/NS/drains/IDENTITY, web/drains.go)
// with the user's own token, as `leasehold drain` does; the server writes
// the drain record and the decision-history records of the leases it
// concerns as it performs the change, with the name the request was
// authenticated as (the record model of leasewrites.go).
const (
	ActionDrain   = "drain"   // an identity was drained
	ActionUndrain = "undrain" // an identity was undrained
)

// Actor names who made a request, for records the server writes: the
// authenticated user, or for an anonymous one its address.
func Actor(rc *fasthttp.RequestCtx) string { return actor(rc) }
