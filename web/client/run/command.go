package run

import "github.com/leasehold/leasehold/internal/cli"

// Command is "leasehold run".
var Command = cli.Command{
	Name:     "run",
	Synopsis: runSynopsis,
	Summary:  `run COMMAND only while holding the lease (see "leasehold run --help")`,
	Run:      runCommand,
}

// LeaderCommand is "leasehold leader".
var LeaderCommand = cli.Command{
	Name:     "leader",
	Synopsis: leaderSynopsis,
	Summary:  "print the lease's current holder (and follow changes)",
	Run:      leaderCommand,
}
