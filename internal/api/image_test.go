package api_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/cumulus-ml/cumulus/internal/api"
)

func TestCheckImageRef(t *testing.T) {
	hex := strings.Repeat("0123456789abcdef", 4)
	cases := map[string]bool{
		// valid
		"python:3.11":                              true,
		"ghcr.io/org/img:tag":                      true,
		"localhost:5000/x@sha256:" + hex:           true,
		"busybox":                                  true,
		"busybox@sha256:" + hex:                    true,
		"python:3.11-slim@sha256:" + hex:           true,
		"library/python":                           true,
		"my_org/img__x.y-z---w:v1.2_3":             true,
		"127.0.0.1:1/nosuch:1":                     true,
		"Registry.Example.COM:443/team/app:LATEST": true,
		"[::1]:5000/app":                           true,
		"localhost/app":                            true,
		"a/b/c/d:e":                                true,
		"localhost:5000":                           true, // image "localhost", tag "5000", as Docker reads it
		// invalid
		"":                                     false,
		"-rm":                                  false,
		"--privileged":                         false,
		"../x":                                 false,
		"./x":                                  false,
		"x/../y":                               false,
		"a b":                                  false,
		"python:3.11 -v /:/host":               false,
		"Python:3.11":                          false,
		"Library/python":                       false,
		"library/Python":                       false,
		"ghcr.io/Org/img":                      false,
		"img:":                                 false,
		"img:-tag":                             false,
		"img:" + strings.Repeat("t", 129):      false,
		"img@sha256:abc":                       false,
		"img@sha256:" + strings.ToUpper(hex):   false,
		"img@md5:" + hex:                       false,
		"img@":                                 false,
		"/img":                                 false,
		"img/":                                 false,
		"a//b":                                 false,
		"img_":                                 false,
		"img..x":                               false,
		"img\n":                                false,
		"img\x00":                              false,
		"host:port/img":                        false,
		"ghcr.io:/img":                         false,
		strings.Repeat("a", 256):               false,
		"a/" + strings.Repeat("b", 300) + ":1": false,
	}
	for ref, ok := range cases {
		err := api.CheckImageRef(ref)
		if (err == nil) != ok {
			t.Errorf("CheckImageRef(%q) = %v; want ok=%v", ref, err, ok)
		}
	}
}

func TestEnvironmentImageIsChecked(t *testing.T) {
	for _, image := range []string{"-rm", "../x", "a b", "UPPER"} {
		e := api.Environment{Properties: api.EnvironmentProperties{Image: image}}
		err := api.PrepareEnvironment(&e, "env", "1")
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Target != "properties.image" {
			t.Errorf("image %q: %v; want a validation error on properties.image", image, err)
		}
	}
	e := api.Environment{Properties: api.EnvironmentProperties{Image: "python:3.11"}}
	if err := api.PrepareEnvironment(&e, "env", "1"); err != nil {
		t.Errorf("python:3.11: %v", err)
	}
	for _, ref := range []string{"image:-rm", "image:../x", "image:a b", "image:"} {
		if _, _, _, err := api.ParseEnvironmentRef(ref); err == nil {
			t.Errorf("ParseEnvironmentRef(%q) took it", ref)
		}
	}
	if _, _, image, err := api.ParseEnvironmentRef("image:ghcr.io/org/img:tag"); err != nil || image != "ghcr.io/org/img:tag" {
		t.Errorf("inline image: %q, %v", image, err)
	}
}

func TestJobInputBlobURIs(t *testing.T) {
	digest := strings.Repeat("ab", 32)
	cases := map[string]bool{
		"cumulus://blobs/" + digest:                  true,
		"https://example.com/data":                   true,
		"azureml://datastores/x/paths/y":             true,
		"cumulus://blobs/../../config.yaml":          false,
		"cumulus://blobs/" + digest + "/../x":        false,
		"cumulus://blobs/" + digest + "?x=1":         false,
		"cumulus://blobs/" + strings.ToUpper(digest): false,
		"cumulus://blobs/" + digest[:63]:             false,
		"cumulus://blobs/":                           false,
		"cumulus://outputs/" + digest:                false,
		"CUMULUS://blobs/" + digest:                  false,
		"cumulus://blobs//" + digest:                 false,
	}
	for uri, ok := range cases {
		for _, typ := range []string{"uri_folder", "uri_file", "literal"} {
			j := api.Job{Properties: api.JobProperties{Command: "true", ComputeID: "c",
				Inputs: map[string]api.JobInput{"data": {JobInputType: typ, URI: uri}}}}
			err := api.PrepareJob(&j, "j")
			if (err == nil) != ok {
				t.Errorf("%s input %q: %v; want ok=%v", typ, uri, err, ok)
			}
		}
	}
}

func TestJobTimeoutBounds(t *testing.T) {
	cases := map[string]bool{"PT1S": true, "PT1H": true, "P90D": true, "PT0S": false, "PT0.5S": false, "-PT1H": false, "P91D": false}
	for timeout, ok := range cases {
		j := api.Job{Properties: api.JobProperties{Command: "true", ComputeID: "c", Limits: &api.JobLimits{Timeout: timeout}}}
		if err := api.PrepareJob(&j, "j"); (err == nil) != ok {
			t.Errorf("timeout %s: %v; want ok=%v", timeout, err, ok)
		}
	}
}
