package api

import "fmt"

// CheckComputeName applies Azure's compute name rule: 3–24 characters,
// a letter first, then letters, digits and '-', and not ending in '-<digits>'.
func CheckComputeName(name string) error {
	if len(name) < 3 || len(name) > 24 {
		return fmt.Errorf("compute name %q must be 3 to 24 characters long", name)
	}
	if !isLetter(name[0]) {
		return fmt.Errorf("compute name %q must start with a letter", name)
	}
	for i := 1; i < len(name); i++ {
		if c := name[i]; !isLetter(c) && !isDigit(c) && c != '-' {
			return fmt.Errorf("compute name %q may contain only letters, digits and '-'", name)
		}
	}
	i := len(name)
	for i > 0 && isDigit(name[i-1]) {
		i--
	}
	if i < len(name) && i > 0 && name[i-1] == '-' {
		return fmt.Errorf("compute name %q may not end with '-' followed by digits", name)
	}
	return nil
}

// CheckWorkspaceName applies Azure's workspace name rule: 3–33 characters,
// a letter or digit first, then letters, digits, '_' and '-'.
func CheckWorkspaceName(name string) error {
	if len(name) < 3 || len(name) > 33 {
		return fmt.Errorf("workspace name %q must be 3 to 33 characters long", name)
	}
	if !isLetter(name[0]) && !isDigit(name[0]) {
		return fmt.Errorf("workspace name %q must start with a letter or digit", name)
	}
	for i := 1; i < len(name); i++ {
		if c := name[i]; !isLetter(c) && !isDigit(c) && c != '-' && c != '_' {
			return fmt.Errorf("workspace name %q may contain only letters, digits, '_' and '-'", name)
		}
	}
	return nil
}

// CheckSegment is the looser rule for subscription, resource group and
// location path segments: 1–90 characters of letters, digits, '-', '_', '.', '(' and ')'.
func CheckSegment(kind, s string) error {
	if len(s) < 1 || len(s) > 90 {
		return fmt.Errorf("%s %q must be 1 to 90 characters long", kind, s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isLetter(c) && !isDigit(c) && c != '-' && c != '_' && c != '.' && c != '(' && c != ')' {
			return fmt.Errorf("%s %q may contain only letters, digits, '-', '_', '.', '(' and ')'", kind, s)
		}
	}
	return nil
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
