package cli

import (
	"fmt"
	"time"

	"github.com/cumulus-ml/cumulus/internal/api"
)

// ScheduleSpec is one entry of the YAML's schedules (a Cumulus extension):
// at each firing of cron in time_zone, min_instances and/or max_instances
// take effect, or with restore the cluster's own settings come back.
type ScheduleSpec struct {
	Name         string `yaml:"name" json:"name"`
	Cron         string `yaml:"cron" json:"cron"`
	TimeZone     string `yaml:"time_zone,omitempty" json:"time_zone,omitempty"`
	MinInstances *int32 `yaml:"min_instances,omitempty" json:"min_instances,omitempty"`
	MaxInstances *int32 `yaml:"max_instances,omitempty" json:"max_instances,omitempty"`
	Restore      bool   `yaml:"restore,omitempty" json:"restore,omitempty"`
}

// ActiveScheduleView is the schedule entry in force, as `compute show`
// prints it.
type ActiveScheduleView struct {
	Name         string     `json:"name"`
	Since        time.Time  `json:"since"`
	Restore      bool       `json:"restore,omitempty"`
	MinInstances int32      `json:"min_instances"`
	MaxInstances int32      `json:"max_instances"`
	NextChange   *time.Time `json:"next_change,omitempty"`
	NextSchedule string     `json:"next_schedule,omitempty"`
}

// schedulesToARM converts the YAML's schedules; the server checks them.
func schedulesToARM(in []ScheduleSpec) []api.ScaleSchedule {
	if len(in) == 0 {
		return nil
	}
	out := make([]api.ScaleSchedule, 0, len(in))
	for _, s := range in {
		out = append(out, api.ScaleSchedule{Name: s.Name, Cron: s.Cron, TimeZone: s.TimeZone,
			MinNodeCount: s.MinInstances, MaxNodeCount: s.MaxInstances, Restore: s.Restore})
	}
	return out
}

func schedulesFromARM(in []api.ScaleSchedule) []ScheduleSpec {
	var out []ScheduleSpec
	for _, s := range in {
		out = append(out, ScheduleSpec{Name: s.Name, Cron: s.Cron, TimeZone: s.TimeZone,
			MinInstances: s.MinNodeCount, MaxInstances: s.MaxNodeCount, Restore: s.Restore})
	}
	return out
}

func activeScheduleView(a *api.ActiveSchedule) *ActiveScheduleView {
	if a == nil {
		return nil
	}
	return &ActiveScheduleView{Name: a.Name, Since: a.Since, Restore: a.Restore, MinInstances: a.MinNodeCount,
		MaxInstances: a.MaxNodeCount, NextChange: a.NextChange, NextSchedule: a.NextSchedule}
}

// applyUpdate applies what `compute update --file` takes from a YAML file
// onto the stored compute: its schedules replace the stored ones (a file
// without schedules removes them); description, tags, instances, idle
// time and idle policy apply when the file gives them.
func (s ComputeSpec) applyUpdate(c *api.Compute) error {
	a := c.Aml()
	a.Schedules = schedulesToARM(s.Schedules)
	if s.Description != "" {
		c.Properties.Description = s.Description
	}
	if s.Tags != nil {
		c.Tags = s.Tags
	}
	if a.ScaleSettings == nil {
		a.ScaleSettings = &api.ScaleSettings{}
	}
	if s.MinInstances != nil {
		a.ScaleSettings.MinNodeCount = s.MinInstances
	}
	if s.MaxInstances != nil {
		a.ScaleSettings.MaxNodeCount = s.MaxInstances
	}
	if s.IdleTimeBeforeScaleDown != nil {
		if *s.IdleTimeBeforeScaleDown < 0 {
			return fmt.Errorf("idle_time_before_scale_down must be 0 or more seconds, got %d", *s.IdleTimeBeforeScaleDown)
		}
		a.ScaleSettings.NodeIdleTimeBeforeScaleDown = fmt.Sprintf("PT%dS", *s.IdleTimeBeforeScaleDown)
	}
	if s.IdlePolicy != nil {
		p, err := s.IdlePolicy.toARM()
		if err != nil {
			return err
		}
		a.IdlePolicy = p
	}
	if s.QueuePolicy != nil {
		p, err := s.QueuePolicy.toARM()
		if err != nil {
			return err
		}
		a.QueuePolicy = p
	}
	return nil
}
