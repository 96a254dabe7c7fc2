package api

import (
	"fmt"
	"strings"
)

// KubernetesPlacement (Cumulus extension) says where a cluster's node pods
// may run on the kubernetes provider: GPU clusters select GPU node pools
// and tolerate their taints. Other providers ignore it.
type KubernetesPlacement struct {
	NodeSelector map[string]string `json:"nodeSelector,omitempty" yaml:"nodeSelector,omitempty"`
	Tolerations  []Toleration      `json:"tolerations,omitempty" yaml:"tolerations,omitempty"`
}

// Toleration is a Kubernetes pod toleration.
type Toleration struct {
	Key               string `json:"key,omitempty" yaml:"key,omitempty"`
	Operator          string `json:"operator,omitempty" yaml:"operator,omitempty"` // Equal (default) or Exists
	Value             string `json:"value,omitempty" yaml:"value,omitempty"`
	Effect            string `json:"effect,omitempty" yaml:"effect,omitempty"` // "" (all), NoSchedule, PreferNoSchedule or NoExecute
	TolerationSeconds *int64 `json:"tolerationSeconds,omitempty" yaml:"tolerationSeconds,omitempty"`
}

// Toleration operators and taint effects Kubernetes knows.
const (
	TolerationEqual  = "Equal"
	TolerationExists = "Exists"
)

var taintEffects = []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}

func prepareKubernetes(v *Validation, k *KubernetesPlacement) {
	if k == nil {
		return
	}
	const target = "properties.properties.kubernetes"
	for key, val := range k.NodeSelector {
		if err := checkLabelKey(key); err != nil {
			v.Add(CodeValidationError, target+".nodeSelector", "node selector key %q: %s", key, err)
		}
		if err := checkLabelValue(val); err != nil {
			v.Add(CodeValidationError, target+".nodeSelector", "node selector %s=%q: %s", key, val, err)
		}
	}
	for i := range k.Tolerations {
		t := &k.Tolerations[i]
		at := fmt.Sprintf("%s.tolerations[%d]", target, i)
		switch op := oneOf(t.Operator, TolerationEqual, TolerationExists); {
		case t.Operator == "":
			t.Operator = TolerationEqual
		case op == "":
			v.Add(CodeValidationError, at+".operator", "operator %q is not one of Equal, Exists", t.Operator)
		default:
			t.Operator = op
		}
		if t.Key != "" {
			if err := checkLabelKey(t.Key); err != nil {
				v.Add(CodeValidationError, at+".key", "key %q: %s", t.Key, err)
			}
		} else if t.Operator != TolerationExists {
			v.Add(CodeValidationError, at+".key", "a toleration without a key must use operator Exists")
		}
		if t.Operator == TolerationExists && t.Value != "" {
			v.Add(CodeValidationError, at+".value", "operator Exists takes no value")
		} else if err := checkLabelValue(t.Value); err != nil {
			v.Add(CodeValidationError, at+".value", "value %q: %s", t.Value, err)
		}
		if t.Effect != "" {
			e := oneOf(t.Effect, taintEffects...)
			if e == "" {
				v.Add(CodeValidationError, at+".effect", "effect %q is not one of NoSchedule, PreferNoSchedule, NoExecute", t.Effect)
			}
			t.Effect = e
		}
		if t.TolerationSeconds != nil && t.Effect != "NoExecute" {
			v.Add(CodeValidationError, at+".tolerationSeconds", "tolerationSeconds applies only to effect NoExecute")
		}
	}
}

// checkLabelKey checks a Kubernetes label key: an optional DNS subdomain
// prefix and '/', then a name of at most 63 characters.
func checkLabelKey(key string) error {
	prefix, name, ok := strings.Cut(key, "/")
	if !ok {
		prefix, name = "", key
	} else if prefix == "" || len(prefix) > 253 || !isDNSSubdomain(prefix) {
		return fmt.Errorf("prefix %q is not a DNS subdomain", prefix)
	}
	if name == "" {
		return fmt.Errorf("the name part is empty")
	}
	return checkLabelValue(name)
}

// checkLabelValue checks a Kubernetes label value (or key name): at most 63
// characters, letters, digits, '-', '_' and '.', starting and ending with a
// letter or digit; empty is allowed.
func checkLabelValue(s string) error {
	if s == "" {
		return nil
	}
	if len(s) > 63 {
		return fmt.Errorf("longer than 63 characters")
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && ((i == 0 || i == len(s)-1) || (c != '-' && c != '_' && c != '.')) {
			return fmt.Errorf("must be letters, digits, '-', '_' or '.', and start and end with a letter or digit")
		}
	}
	return nil
}

func isDNSSubdomain(s string) bool {
	for _, part := range strings.Split(s, ".") {
		if part == "" || len(part) > 63 || part[0] == '-' || part[len(part)-1] == '-' {
			return false
		}
		for i := 0; i < len(part); i++ {
			c := part[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}
