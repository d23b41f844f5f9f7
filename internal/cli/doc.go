// Package cli holds what every leasehold command shares: the signature a
// command runs with (Func), its entry in the table of commands (Command),
// and one flag parser (FlagSet) that gives every command the same habits:
// double-dash flags listed in one style by --help, each with an
// environment twin LEASEHOLD_<FLAG> (a flag given on the command line wins
// over its variable, which wins over the default), and short aliases such
// as -n for --namespace.
//
// Commands live in the packages that own their work (the server in main,
// the database commands with the bbolt backend, the client commands under
// web/client, the plugin commands in plugins/host), on every layer of the
// tree. So that all of them can share it, it is a leaf that imports only
// the standard library and knows nothing of leases, HTTP or storage. It
// sits at the top of the tree, outside the four layers (engine, storage,
// plugins, web), so that storage and plugins reach no web package by
// using it (architecture_test.go).
package cli
