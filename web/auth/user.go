package auth

// User is an authenticated (or anonymous) requester.
type User struct {
	Name   string
	UID    string
	Groups []string
}

// The names kube-apiserver gives to requests without credentials and the
// group every authenticated user joins.
const (
	AnonymousUser      = "system:anonymous"
	UnauthenticatedGrp = "system:unauthenticated"
	AuthenticatedGroup = "system:authenticated"
)

// Anonymous is the user of requests without credentials when no
// authenticator is configured.
var Anonymous = User{Name: AnonymousUser, Groups: []string{UnauthenticatedGrp}}

// withAuthenticated adds system:authenticated to the groups, as
// kube-apiserver's AuthenticatedGroupAdder does, unless present.
func withAuthenticated(u User) User {
	for _, g := range u.Groups {
		if g == AuthenticatedGroup {
			return u
		}
	}
	u.Groups = append(append([]string(nil), u.Groups...), AuthenticatedGroup)
	return u
}
