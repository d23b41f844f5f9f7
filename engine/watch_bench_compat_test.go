package engine

import "k8s.io/apimachinery/pkg/watch"

func takeAll(w BatchWatcher, dst []watch.Event) ([]watch.Event, bool) { return w.TakeEvents(dst) }
