package api

// SlurmPlacement (Cumulus extension) says where a cluster's node jobs go on
// the slurm provider: the partition, QOS and account each node's Slurm job
// is submitted with, in place of the server's defaults. A compute that sets
// it on a server with another provider is refused.
type SlurmPlacement struct {
	Partition string `json:"partition,omitempty" yaml:"partition,omitempty"`
	QOS       string `json:"qos,omitempty" yaml:"qos,omitempty"`
	Account   string `json:"account,omitempty" yaml:"account,omitempty"`
}

func prepareSlurm(v *Validation, s *SlurmPlacement) {
	if s == nil {
		return
	}
	const target = "properties.properties.slurm"
	for _, f := range []struct{ name, value string }{{"partition", s.Partition}, {"qos", s.QOS}, {"account", s.Account}} {
		if !slurmName(f.value) {
			v.Add(CodeValidationError, target+"."+f.name, "slurm %s %q: use letters, digits, '-', '_' and '.' (at most 64)", f.name, f.value)
		}
	}
}

// slurmName reports whether s can name a Slurm partition, QOS or account
// ("" is the server's default).
func slurmName(s string) bool {
	if len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}
