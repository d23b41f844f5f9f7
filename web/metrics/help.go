package metrics

import (
	"bytes"
	"fmt"
	"io"
)

// helpTexts describe the series whose # HELP line VictoriaMetrics/metrics
// leaves empty: leasehold's own counters and gauges kept in its Set, and
// the Go runtime and process series of WriteProcessMetrics. A scrape
// should explain itself; TestEveryFamilyHasHelp fails when a series
// appears without a text here.
var helpTexts = map[string]string{
	"leasehold_http_requests_total":         "Requests answered, by verb (LIST, WATCH, ...; the method for non-resource requests), API group, version, resource and HTTP status code.",
	"leasehold_storage_commit_errors_total": "Storage commits that failed; their writes were answered with an error.",
	"leasehold_storage_commit_writes_total": "Writes carried by successful storage commits (one commit groups the writes that arrive together).",
	"leasehold_watch_streams":               "Watch streams open now.",

	"go_sched_latencies_seconds":          "Time goroutines spent runnable before they ran.",
	"go_mutex_wait_seconds_total":         "Time goroutines spent blocked on a sync.Mutex, sync.RWMutex or runtime-internal lock.",
	"go_gc_mark_assist_cpu_seconds_total": "CPU time goroutines spent helping the garbage collector mark.",
	"go_gc_cpu_seconds_total":             "CPU time spent in garbage collection.",
	"go_gc_pauses_seconds":                "Stop-the-world pauses of the garbage collector.",
	"go_scavenge_cpu_seconds_total":       "CPU time spent returning free memory to the operating system.",
	"go_memlimit_bytes":                   "The Go runtime's soft memory limit (GOMEMLIMIT).",

	"go_memstats_alloc_bytes":          "Bytes of heap objects allocated and not yet freed.",
	"go_memstats_alloc_bytes_total":    "Bytes allocated for heap objects since the process started.",
	"go_memstats_buck_hash_sys_bytes":  "Bytes of the profiling bucket hash table.",
	"go_memstats_frees_total":          "Heap objects freed since the process started.",
	"go_memstats_gc_cpu_fraction":      "Fraction of the CPU time available to the process used by the garbage collector since the process started.",
	"go_memstats_gc_sys_bytes":         "Bytes of garbage collection metadata.",
	"go_memstats_heap_alloc_bytes":     "Bytes of heap objects allocated and not yet freed.",
	"go_memstats_heap_idle_bytes":      "Bytes in heap spans holding no object.",
	"go_memstats_heap_inuse_bytes":     "Bytes in heap spans holding at least one object.",
	"go_memstats_heap_objects":         "Heap objects allocated and not yet freed.",
	"go_memstats_heap_released_bytes":  "Bytes of heap memory returned to the operating system.",
	"go_memstats_heap_sys_bytes":       "Bytes of heap memory obtained from the operating system.",
	"go_memstats_last_gc_time_seconds": "When the last garbage collection finished, as a Unix timestamp.",
	"go_memstats_lookups_total":        "Pointer lookups performed by the runtime.",
	"go_memstats_mallocs_total":        "Heap objects allocated since the process started.",
	"go_memstats_mcache_inuse_bytes":   "Bytes of mcache structures in use.",
	"go_memstats_mcache_sys_bytes":     "Bytes of memory obtained from the operating system for mcache structures.",
	"go_memstats_mspan_inuse_bytes":    "Bytes of mspan structures in use.",
	"go_memstats_mspan_sys_bytes":      "Bytes of memory obtained from the operating system for mspan structures.",
	"go_memstats_next_gc_bytes":        "Heap size at which the next garbage collection starts.",
	"go_memstats_other_sys_bytes":      "Bytes of memory for other runtime allocations.",
	"go_memstats_stack_inuse_bytes":    "Bytes of goroutine stack spans in use.",
	"go_memstats_stack_sys_bytes":      "Bytes of stack memory obtained from the operating system.",
	"go_memstats_sys_bytes":            "Bytes of memory obtained from the operating system in all.",

	"go_cgo_calls_count":     "Calls from Go to C since the process started.",
	"go_cpu_count":           "Logical CPUs usable by the process.",
	"go_gc_duration_seconds": "Stop-the-world pause durations of garbage collections (quantiles over recent collections).",
	"go_gc_forced_count":     "Garbage collections forced by the application (runtime.GC, debug.FreeOSMemory).",
	"go_gomaxprocs":          "GOMAXPROCS: the CPUs that may run Go code at once.",
	"go_goroutines":          "Goroutines that exist now.",
	"go_threads":             "Operating system threads created by the Go runtime.",
	"go_info":                "The Go version the binary was built with; always 1.",
	"go_info_ext":            "The compiler, GOARCH, GOOS and GOROOT of the build; always 1.",

	"process_cpu_seconds_system_total":       "CPU time the process spent in the kernel.",
	"process_cpu_seconds_total":              "CPU time the process spent in user and kernel mode.",
	"process_cpu_seconds_user_total":         "CPU time the process spent in user mode.",
	"process_major_pagefaults_total":         "Page faults of the process that needed a disk read.",
	"process_minor_pagefaults_total":         "Page faults of the process served without a disk read.",
	"process_num_threads":                    "Operating system threads of the process.",
	"process_resident_memory_bytes":          "Resident memory of the process.",
	"process_start_time_seconds":             "When the process started, as a Unix timestamp.",
	"process_virtual_memory_bytes":           "Virtual memory of the process.",
	"process_virtual_memory_peak_bytes":      "Peak virtual memory of the process.",
	"process_resident_memory_peak_bytes":     "Peak resident memory of the process.",
	"process_resident_memory_anon_bytes":     "Resident anonymous memory of the process (heap, stacks).",
	"process_resident_memory_file_bytes":     "Resident file-backed memory of the process (the binary, mapped files such as the database).",
	"process_resident_memory_shared_bytes":   "Resident shared memory of the process.",
	"process_io_read_bytes_total":            "Bytes the process read, from storage or page cache.",
	"process_io_written_bytes_total":         "Bytes the process wrote, to storage or page cache.",
	"process_io_read_syscalls_total":         "Read system calls of the process.",
	"process_io_write_syscalls_total":        "Write system calls of the process.",
	"process_io_storage_read_bytes_total":    "Bytes the process caused to be read from storage.",
	"process_io_storage_written_bytes_total": "Bytes the process caused to be written to storage.",
}

// fillHelp copies an exposition to w with every empty "# HELP name" line
// completed from helpTexts.
func fillHelp(w io.Writer, exposition []byte) {
	prefix := []byte("# HELP ")
	for len(exposition) > 0 {
		line := exposition
		if i := bytes.IndexByte(exposition, '\n'); i >= 0 {
			line, exposition = exposition[:i+1], exposition[i+1:]
		} else {
			exposition = nil
		}
		if name, ok := bytes.CutPrefix(bytes.TrimRight(line, "\n"), prefix); ok && bytes.IndexByte(name, ' ') < 0 {
			if text, ok := helpTexts[string(name)]; ok {
				fmt.Fprintf(w, "# HELP %s %s\n", name, text)
				continue
			}
		}
		_, _ = w.Write(line)
	}
}
