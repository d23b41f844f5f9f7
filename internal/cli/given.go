package cli

import (
	"flag"
	"os"
)

// Given are the flags given on the command line or through their
// environment twins: the ones a restart applies over what the data
// directory recorded, where the others' defaults would not.
func (fs *FlagSet) Given() map[string]bool {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	fs.VisitAll(func(f *flag.Flag) {
		if _, ok := os.LookupEnv(EnvName(f.Name)); ok {
			given[f.Name] = true
		}
	})
	return given
}
