package server

// APIFamily is one row of the api-version table, for the external tests.
type APIFamily struct {
	Name     string
	Versions []string
	Jobs     bool
}

// APIFamilies is the api-version table.
func APIFamilies() []APIFamily {
	var out []APIFamily
	for _, f := range apiFamilies {
		out = append(out, APIFamily{f.name, f.versions, f.jobs})
	}
	return out
}

// IsAPIVersionShape reports whether v looks like an api-version to ARM.
func IsAPIVersionShape(v string) bool { return apiVersionShape().MatchString(v) }
