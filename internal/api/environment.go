package api

import (
	"fmt"
	"strings"
)

// Environment is an environment version (…/environments/{name}/versions/{version}),
// kept minimal: the image jobs that name it run in.
type Environment struct {
	ID         string                `json:"id"`
	Name       string                `json:"name"`
	Type       string                `json:"type"`
	SystemData *SystemData           `json:"systemData,omitempty"`
	Properties EnvironmentProperties `json:"properties"`
}

// EnvironmentProperties is an environment version's properties.
type EnvironmentProperties struct {
	Image       string            `json:"image"`
	Description string            `json:"description,omitempty"`
	Tags        map[string]string `json:"tags,omitempty"`
	OSType      string            `json:"osType,omitempty"`
}

// TypeEnvironment is the ARM type of an environment version.
const TypeEnvironment = Provider + "/workspaces/environments/versions"

// PrepareEnvironment validates an environment version.
func PrepareEnvironment(e *Environment, name, version string) error {
	var v Validation
	if err := CheckAssetName("environment name", name); err != nil {
		v.Add(CodeInvalidName, "name", "%s", err)
	}
	if err := CheckAssetName("environment version", version); err != nil {
		v.Add(CodeInvalidName, "version", "%s", err)
	}
	if e.Properties.Image == "" {
		v.Add(CodeValidationError, "properties.image", "image is required (e.g. python:3.11 or a locally built image)")
	} else if err := CheckImageRef(e.Properties.Image); err != nil {
		v.Add(CodeValidationError, "properties.image", "%s", err)
	}
	if e.Properties.OSType == "" {
		e.Properties.OSType = OSLinux
	}
	checkTags(&v, e.Properties.Tags)
	return v.Err()
}

// LatestVersion is the version ParseEnvironmentRef returns for
// azureml:NAME@latest: the environment's newest version.
const LatestVersion = "@latest"

// EnvironmentContainer is an environment with its versions (GET
// …/environments): ARM's EnvironmentContainer, with the image of the
// latest version as a Cumulus extension.
type EnvironmentContainer struct {
	ID         string                         `json:"id"`
	Name       string                         `json:"name"`
	Type       string                         `json:"type"`
	Properties EnvironmentContainerProperties `json:"properties"`
}

// EnvironmentContainerProperties says an environment's latest version.
type EnvironmentContainerProperties struct {
	LatestVersion string `json:"latestVersion"`
	LatestImage   string `json:"latestImage,omitempty"`
	Versions      int    `json:"versionCount"`
}

// TypeEnvironmentContainer is the ARM type of an environment.
const TypeEnvironmentContainer = Provider + "/workspaces/environments"

// IsCuratedEnvironment reports whether name is one of Azure ML's curated
// environments (AzureML-…).
func IsCuratedEnvironment(name string) bool {
	return strings.HasPrefix(strings.ToLower(name), "azureml-")
}

// CuratedEnvironmentNote is the line at the top of the log of a job that
// names a curated environment its workspace has not registered: it runs
// in the node's own environment.
func CuratedEnvironmentNote(name, workspace string) string {
	return fmt.Sprintf("cumulus: environment %s is one of Azure ML's curated environments, which workspace %s maps to no image: "+
		"the job runs in the node's own environment (its Python and packages). To run it in an image, register the name once: "+
		"cumulus environment create --name %s --version 1 --image IMAGE (Azure publishes its curated images under mcr.microsoft.com/azureml/curated/)",
		name, workspace, name)
}

// ParseEnvironmentRef reads a job's environmentId: "azureml:NAME:VERSION",
// "azureml:NAME@latest" (as azure-ai-ml sends "NAME@latest"),
// an ARM id …/environments/NAME/versions/VERSION, or "image:REF" (an
// inline image, as the CLI sends `environment: {image: …}`; it must be an
// image reference, CheckImageRef).
func ParseEnvironmentRef(ref string) (name, version, image string, err error) {
	switch {
	case strings.HasPrefix(ref, "image:"):
		image := strings.TrimPrefix(ref, "image:")
		if err := CheckImageRef(image); err != nil {
			return "", "", "", err
		}
		return "", "", image, nil
	case strings.HasPrefix(ref, "azureml:"):
		rest := strings.TrimPrefix(ref, "azureml:")
		if i := strings.Index(rest, "/environments/"); i >= 0 { // azureml:/subscriptions/…
			return ParseEnvironmentRef(rest)
		}
		if name, ok := strings.CutSuffix(rest, "@latest"); ok && name != "" && !strings.Contains(name, ":") {
			return name, LatestVersion, "", nil
		}
		name, version, ok := strings.Cut(rest, ":")
		if !ok || name == "" || version == "" {
			return "", "", "", fmt.Errorf("environment %q must be azureml:<name>:<version> or azureml:<name>@latest", ref)
		}
		return name, version, "", nil
	case strings.Contains(ref, "/environments/"):
		p := strings.Split(strings.Trim(ref, "/"), "/")
		if len(p) >= 4 && strings.EqualFold(p[len(p)-4], "environments") && strings.EqualFold(p[len(p)-2], "versions") {
			return p[len(p)-3], p[len(p)-1], "", nil
		}
	}
	return "", "", "", fmt.Errorf("environment %q is not azureml:<name>:<version>, an environment version id, or an inline image", ref)
}

// CheckAssetName applies Azure's rule for asset names and versions
// (environments): 1–255 letters, digits, '-', '_' and '.', starting with a
// letter or digit, as in AzureML-sklearn-1.0-ubuntu20.04-py38-cpu.
func CheckAssetName(what, name string) error {
	if len(name) < 1 || len(name) > 255 {
		return fmt.Errorf("%s %q must be 1 to 255 characters long", what, name)
	}
	if !isLetter(name[0]) && !isDigit(name[0]) {
		return fmt.Errorf("%s %q must start with a letter or digit", what, name)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !isLetter(c) && !isDigit(c) && c != '-' && c != '_' && c != '.' {
			return fmt.Errorf("%s %q may contain only letters, digits, '-', '_' and '.'", what, name)
		}
	}
	return nil
}
