package sim

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// SweepKeys are the settings a sweep can vary.
var SweepKeys = []string{"idle", "policy", "min", "max", "size", "tier", "provision-delay", "eviction-rate", "delay-weight",
	"queue", "queue-policy", "preemption", "min-runtime", "half-life"}

// Sweep varies one setting over several values.
type Sweep struct {
	Key    string
	Values []string
}

// ParseSweep reads "KEY=V1,V2,…", e.g. "idle=0,60,120,adaptive": idle
// takes durations (a bare number is seconds) or "adaptive" (the adaptive
// policy, with the base idle timeout while it learns); queue takes a queue
// policy with an optional preemption ("fifo,fair,fair+over_share").
func ParseSweep(spec string) (Sweep, error) {
	key, vals, ok := strings.Cut(spec, "=")
	key = strings.TrimSpace(key)
	if !ok || key == "" || strings.TrimSpace(vals) == "" {
		return Sweep{}, fmt.Errorf("sweep %q: want KEY=V1,V2,… with KEY one of %s", spec, strings.Join(SweepKeys, ", "))
	}
	sw := Sweep{Key: key}
	for v := range strings.SplitSeq(vals, ",") {
		if v = strings.TrimSpace(v); v != "" {
			sw.Values = append(sw.Values, v)
		}
	}
	_, err := sw.Configs(DefaultConfig())
	return sw, err
}

// Configs returns base with the swept setting set to each value, labelled
// "key=value" (or "adaptive").
func (sw Sweep) Configs(base Config) ([]Config, error) {
	var out []Config
	var errs []error
	for _, v := range sw.Values {
		c := base
		c.Label = sw.Key + "=" + v
		if err := set(&c, sw.Key, v); err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, c)
	}
	return out, errors.Join(errs...)
}

// set changes one setting of c from text.
func set(c *Config, key, v string) error {
	var err error
	switch key {
	case "idle":
		if v == PolicyAdaptive {
			c.Policy, c.Label = PolicyAdaptive, PolicyAdaptive
			return nil
		}
		c.Policy = PolicyFixed
		c.IdleTimeout, err = ParseDuration(v)
	case "policy":
		c.Policy = v
	case "min":
		c.Min, err = strconv.Atoi(v)
	case "max":
		c.Max, err = strconv.Atoi(v)
	case "size":
		c.Size = v
	case "tier":
		c.LowPriority, err = ParseTier(v)
	case "provision-delay":
		c.Provision, err = ParseDelay(v)
	case "eviction-rate":
		c.EvictionRate, err = strconv.ParseFloat(v, 64)
	case "delay-weight":
		c.Adaptive.DelayWeight, err = strconv.ParseFloat(v, 64)
	case "queue":
		// POLICY[+PREEMPTION]: fifo, fair, fair+over_share, …, all on
		// one cluster shared by the trace's teams, as fair share has it.
		c.Queue, c.Preemption, _ = strings.Cut(v, "+")
		c.OneCluster = true
		if c.Preemption == "" {
			c.Preemption = PreemptNone
		}
		err = errors.Join(c.validateQueue()...)
	case "queue-policy":
		c.Queue, c.OneCluster = v, true
	case "preemption":
		c.Preemption = v
	case "min-runtime":
		c.MinRuntime, err = ParseDuration(v)
	case "half-life":
		c.HalfLife, err = ParseDuration(v)
	default:
		return fmt.Errorf("sweep key %q: want one of %s", key, strings.Join(SweepKeys, ", "))
	}
	if err != nil {
		return fmt.Errorf("sweep %s=%s: %w", key, v, err)
	}
	return nil
}

// ParseTier reads a tier as the CLI spells it: dedicated or low_priority
// (Azure's Dedicated and LowPriority too).
func ParseTier(s string) (lowPriority bool, err error) {
	switch strings.ToLower(strings.ReplaceAll(s, "-", "_")) {
	case "dedicated":
		return false, nil
	case "low_priority", "lowpriority":
		return true, nil
	}
	return false, fmt.Errorf("tier %q is not dedicated or low_priority", s)
}

// RunAll simulates the trace under every setting, up to workers at once
// (<= 0: one per CPU), and returns the results in the order of cfgs.
func RunAll(t *Trace, cfgs []Config, workers int) ([]*Result, error) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	out := make([]*Result, len(cfgs))
	errs := make([]error, len(cfgs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, len(cfgs)) {
		wg.Go(func() {
			for i := range next {
				out[i], errs[i] = Run(t, cfgs[i])
				if errs[i] != nil {
					errs[i] = fmt.Errorf("%s: %w", cfgs[i].Label, errs[i])
				}
			}
		})
	}
	for i := range cfgs {
		next <- i
	}
	close(next)
	wg.Wait()
	return out, errors.Join(errs...)
}
