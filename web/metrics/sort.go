package metrics

import (
	"cmp"
	"slices"
)

func sortKeys(keys []durationKey) {
	slices.SortFunc(keys, func(a, b durationKey) int {
		return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(a.resource, b.resource),
			cmp.Compare(a.version, b.version), cmp.Compare(a.verb, b.verb))
	})
}
