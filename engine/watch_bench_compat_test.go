package engine

import "k8s.io/apimachinery/pkg/watch"

func takeAll(w BatchWatcher, dst []watch.Event) ([]watch.Event, bool) {
	evs, open, _ := w.TakeEvents(dst, 1<<30)
	return evs, open
}
