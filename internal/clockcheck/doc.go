// Package clockcheck keeps a device whose wall clock has not been set yet
// from acting on it. An edge device without a battery-backed clock (a
// Raspberry Pi) boots in 1970, or at the time fake-hwclock saved at its
// last shutdown, and its clock is stepped to the right time only once NTP
// answers. Before that, TLS fails in confusing ways ("certificate has
// expired or is not yet valid" from a peer whose certificate is fine), and
// a CA generated then is valid from 1970 and expired by the time the clock
// is set.
//
// A Floor is the earliest the clock can truly read: the time this binary
// was built, and the NotBefore of the certificates the device already
// holds (nothing valid can be issued before the clock that issued it read
// that time). Wait blocks, saying why, until the clock passes it; Expired
// names a certificate that ran out while the device was off, so that the
// member says so instead of failing its peers' handshakes.
//
// A leaf outside the layers, like internal/pki: the standard library only.
package clockcheck
