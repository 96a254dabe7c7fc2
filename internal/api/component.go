package api

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Component is a component version (…/components/{name}/versions/{version}):
// a reusable step. Its spec is the az ml component YAML as the clients send
// it (REST: an untyped object); a pipeline step that names it
// (componentId) gets from it what the step does not set itself.
type Component struct {
	ID         string              `json:"id"`
	Name       string              `json:"name"`
	Type       string              `json:"type"`
	SystemData *SystemData         `json:"systemData,omitempty"`
	Properties ComponentProperties `json:"properties"`
}

// ComponentProperties is a component version's properties.
type ComponentProperties struct {
	ComponentSpec map[string]any    `json:"componentSpec"`
	Description   string            `json:"description,omitempty"`
	Tags          map[string]string `json:"tags,omitempty"`
	Properties    map[string]string `json:"properties,omitempty"`
	IsAnonymous   bool              `json:"isAnonymous,omitempty"`
	IsArchived    bool              `json:"isArchived,omitempty"`
}

// TypeComponent is the ARM type of a component version.
const TypeComponent = Provider + "/workspaces/components/versions"

// componentSpec is what Cumulus reads of a component's spec.
type componentSpec struct {
	Type                 string                   `json:"type"`
	Command              string                   `json:"command"`
	Code                 string                   `json:"code"`
	Environment          json.RawMessage          `json:"environment"`
	EnvironmentVariables map[string]string        `json:"environment_variables"`
	Inputs               map[string]componentPort `json:"inputs"`
	Outputs              map[string]componentPort `json:"outputs"`
	Resources            *struct {
		InstanceCount int32 `json:"instance_count"`
	} `json:"resources"`
	ParallelSpec
}

// componentPort declares one input or output of a component.
type componentPort struct {
	Type     string `json:"type"`
	Default  any    `json:"default"`
	Optional bool   `json:"optional"`
}

// PrepareComponent validates a component version.
func PrepareComponent(c *Component, name, version string) error {
	var v Validation
	if err := CheckAssetName("component name", name); err != nil {
		v.Add(CodeInvalidName, "name", "%s", err)
	}
	if err := CheckAssetName("component version", version); err != nil {
		v.Add(CodeInvalidName, "version", "%s", err)
	}
	spec, err := c.spec()
	switch {
	case err != nil:
		v.Add(CodeValidationError, "properties.componentSpec", "%s", err)
	case !strings.EqualFold(spec.Type, "command") && !strings.EqualFold(spec.Type, "parallel"):
		v.Add(CodeValidationError, "properties.componentSpec.type", "component type %q is not command or parallel", spec.Type)
	}
	checkTags(&v, c.Properties.Tags)
	return v.Err()
}

func (c *Component) spec() (componentSpec, error) {
	var s componentSpec
	raw, err := json.Marshal(c.Properties.ComponentSpec)
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return s, fmt.Errorf("componentSpec: %w", err)
	}
	return s, nil
}

// ParseComponentRef reads a step's componentId: an ARM id
// …/components/NAME/versions/VERSION (with or without azureml:), or
// azureml:NAME:VERSION.
func ParseComponentRef(ref string) (name, version string, err error) {
	r := strings.TrimPrefix(ref, "azureml:")
	if strings.Contains(r, "/components/") {
		p := strings.Split(strings.Trim(r, "/"), "/")
		if len(p) >= 4 && strings.EqualFold(p[len(p)-4], "components") && strings.EqualFold(p[len(p)-2], "versions") {
			return p[len(p)-3], p[len(p)-1], nil
		}
	} else if n, v, ok := strings.Cut(r, ":"); ok && n != "" && v != "" {
		return n, v, nil
	}
	return "", "", fmt.Errorf("componentId %q is not a component version id (…/components/NAME/versions/VERSION) or azureml:NAME:VERSION", ref)
}

// ApplyComponent fills a step from component c: its kind, command, code,
// environment, parallel settings and the defaults of its inputs, where
// the step does not set them itself.
func (s *PipelineStep) ApplyComponent(c Component) error {
	spec, err := c.spec()
	if err != nil {
		return err
	}
	if s.Type == "" && s.JobType == "" {
		s.Type = strings.ToLower(spec.Type)
	}
	p := &s.JobProperties
	if p.Command == "" {
		p.Command = spec.Command
	}
	if p.CodeID == "" {
		p.CodeID = strings.TrimPrefix(spec.Code, "azureml:")
	}
	if p.EnvironmentID == "" && len(spec.Environment) > 0 {
		var env string
		if json.Unmarshal(spec.Environment, &env) == nil {
			p.EnvironmentID = env
		} else {
			var inline struct {
				Image string `json:"image"`
			}
			if json.Unmarshal(spec.Environment, &inline) == nil && inline.Image != "" {
				p.EnvironmentID = "image:" + inline.Image
			}
		}
	}
	for k, val := range spec.EnvironmentVariables {
		if p.EnvironmentVariables == nil {
			p.EnvironmentVariables = map[string]string{}
		}
		if _, set := p.EnvironmentVariables[k]; !set {
			p.EnvironmentVariables[k] = val
		}
	}
	if p.Resources == nil && spec.Resources != nil {
		p.Resources = &JobResources{InstanceCount: spec.Resources.InstanceCount}
	}
	for k, port := range spec.Inputs {
		if _, set := p.Inputs[k]; set || port.Default == nil {
			continue
		}
		if p.Inputs == nil {
			p.Inputs = map[string]JobInput{}
		}
		p.Inputs[k] = JobInput{JobInputType: "literal", Value: fmt.Sprint(port.Default)}
	}
	for k, port := range spec.Outputs {
		if _, set := p.Outputs[k]; set {
			continue
		}
		if p.Outputs == nil {
			p.Outputs = map[string]JobOutput{}
		}
		t := port.Type
		if t == "" {
			t = "uri_folder"
		}
		p.Outputs[k] = JobOutput{JobOutputType: t}
	}
	if strings.EqualFold(spec.Type, "parallel") {
		if p.ParallelSpec == nil {
			p.ParallelSpec = &ParallelSpec{}
		}
		ps, cs := p.ParallelSpec, spec.ParallelSpec
		if ps.InputData == "" {
			ps.InputData = cs.InputData
		}
		if ps.MiniBatchSize == "" {
			ps.MiniBatchSize = cs.MiniBatchSize
		}
		if ps.PartitionKeys == nil {
			ps.PartitionKeys = cs.PartitionKeys
		}
		if ps.MaxConcurrencyPerInstance == 0 {
			ps.MaxConcurrencyPerInstance = cs.MaxConcurrencyPerInstance
		}
		if ps.ErrorThreshold == nil {
			ps.ErrorThreshold = cs.ErrorThreshold
		}
		if ps.MiniBatchErrorThreshold == nil {
			ps.MiniBatchErrorThreshold = cs.MiniBatchErrorThreshold
		}
		if ps.LoggingLevel == "" {
			ps.LoggingLevel = cs.LoggingLevel
		}
		if ps.RetrySettings == nil {
			ps.RetrySettings = cs.RetrySettings
		}
		if ps.Task == nil && cs.Task != nil {
			t := *cs.Task
			t.Code = strings.TrimPrefix(t.Code, "azureml:")
			ps.Task = &t
		}
	}
	return nil
}
