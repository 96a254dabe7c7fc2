package promtext

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The Go runtime's and the process's families, under the names
// Prometheus's client gives them.
var (
	famGoroutines   = NewFamily("go_goroutines", "Number of goroutines that currently exist.", Gauge)
	famThreads      = NewFamily("go_threads", "Number of OS threads created.", Gauge)
	famGoInfo       = NewFamily("go_info", "Information about the Go environment.", Gauge, "version")
	famAlloc        = NewFamily("go_memstats_alloc_bytes", "Number of bytes allocated in heap and currently in use.", Gauge)
	famAllocTotal   = NewFamily("go_memstats_alloc_bytes_total", "Total number of bytes allocated in heap until now, even if released already.", Counter)
	famSys          = NewFamily("go_memstats_sys_bytes", "Number of bytes obtained from system.", Gauge)
	famHeapInuse    = NewFamily("go_memstats_heap_inuse_bytes", "Number of heap bytes that are in use.", Gauge)
	famGCCycles     = NewFamily("go_gc_cycles_total", "Count of completed GC cycles.", Counter)
	famGCPause      = NewFamily("go_gc_pause_seconds_total", "Total time the world was stopped for garbage collection.", Counter)
	famCPU          = NewFamily("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", Counter)
	famRSS          = NewFamily("process_resident_memory_bytes", "Resident memory size in bytes.", Gauge)
	famVSZ          = NewFamily("process_virtual_memory_bytes", "Virtual memory size in bytes.", Gauge)
	famOpenFDs      = NewFamily("process_open_fds", "Number of open file descriptors.", Gauge)
	famMaxFDs       = NewFamily("process_max_fds", "Maximum number of open file descriptors.", Gauge)
	famStartTime    = NewFamily("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", Gauge)
	runtimeFamilies = []*Family{famGoroutines, famThreads, famGoInfo, famAlloc, famAllocTotal, famSys, famHeapInuse, famGCCycles, famGCPause,
		famCPU, famRSS, famVSZ, famOpenFDs, famMaxFDs, famStartTime}
)

// Runtime is the collector of the Go runtime's and this process's
// figures.
type Runtime struct{}

// Families are the runtime's and the process's.
func (Runtime) Families() []*Family { return runtimeFamilies }

// Collect reads the runtime's memory statistics and, where /proc is,
// the process's CPU, memory and descriptors.
func (Runtime) Collect(_ context.Context, s *Scrape) error {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	threads, _ := runtime.ThreadCreateProfile(nil)
	s.Add(famGoroutines, float64(runtime.NumGoroutine()))
	s.Add(famThreads, float64(threads))
	s.Add(famGoInfo, 1, runtime.Version())
	s.Add(famAlloc, float64(ms.Alloc))
	s.Add(famAllocTotal, float64(ms.TotalAlloc))
	s.Add(famSys, float64(ms.Sys))
	s.Add(famHeapInuse, float64(ms.HeapInuse))
	s.Add(famGCCycles, float64(ms.NumGC))
	s.Add(famGCPause, time.Duration(ms.PauseTotalNs).Seconds())
	procStat(s)
	return nil
}

// procStat adds the process families from /proc/self (nothing where
// there is no /proc).
func procStat(s *Scrape) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return
	}
	// pid (comm) state …: the fields after comm, which may hold spaces.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 22 {
		return
	}
	num := func(k int) float64 { v, _ := strconv.ParseFloat(f[k], 64); return v }
	const ticks = 100 // USER_HZ, the same on every Linux architecture Go runs on
	// After comm: state(0) … utime(11) stime(12) … starttime(19) vsize(20) rss(21).
	s.Add(famCPU, (num(11)+num(12))/ticks)
	s.Add(famVSZ, num(20))
	s.Add(famRSS, num(21)*float64(os.Getpagesize()))
	if boot := bootTime(); boot > 0 {
		s.Add(famStartTime, boot+num(19)/ticks)
	}
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		s.Add(famOpenFDs, float64(len(ents)))
	}
	if lim, err := os.ReadFile("/proc/self/limits"); err == nil {
		for _, line := range strings.Split(string(lim), "\n") {
			if rest, ok := strings.CutPrefix(line, "Max open files"); ok {
				if fs := strings.Fields(rest); len(fs) > 0 {
					if v, err := strconv.ParseFloat(fs[0], 64); err == nil {
						s.Add(famMaxFDs, v)
					}
				}
			}
		}
	}
}

// bootTime is the machine's boot time in Unix seconds (0: unknown), read
// once: it does not change while the process lives.
var bootTime = sync.OnceValue(func() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "btime "); ok {
			v, _ := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v
		}
	}
	return 0
})
