package api

import (
	"fmt"
	"strings"
)

const (
	maxTags        = 50
	maxTagKeyLen   = 512
	maxTagValueLen = 256
	maxDescription = 4096
)

func checkTags(v *Validation, tags map[string]string) {
	if len(tags) > maxTags {
		v.Add(CodeValidationError, "tags", "at most %d tags are allowed, got %d", maxTags, len(tags))
	}
	for k, val := range tags {
		switch {
		case k == "":
			v.Add(CodeValidationError, "tags", "tag names may not be empty")
		case len(k) > maxTagKeyLen:
			v.Add(CodeValidationError, "tags", "tag name %.20q… is longer than %d characters", k, maxTagKeyLen)
		case strings.ContainsAny(k, "<>%&\\?/"):
			v.Add(CodeValidationError, "tags", "tag name %q may not contain any of < > %% & \\ ? /", k)
		case len(val) > maxTagValueLen:
			v.Add(CodeValidationError, "tags", "value of tag %q is longer than %d characters", k, maxTagValueLen)
		}
	}
}

func checkIdentity(v *Validation, id *Identity) {
	switch id.Type {
	case IdentityNone, IdentitySystem:
		if len(id.UserAssignedIdentities) > 0 {
			v.Add(CodeValidationError, "identity.userAssignedIdentities", "userAssignedIdentities may be set only when identity type includes UserAssigned")
		}
	case IdentityUser, IdentitySystemAndUser:
		if len(id.UserAssignedIdentities) == 0 {
			v.Add(CodeValidationError, "identity.userAssignedIdentities", "identity type %s needs at least one entry in userAssignedIdentities", id.Type)
		}
		for k := range id.UserAssignedIdentities {
			if !isUserIdentityID(k) {
				v.Add(CodeValidationError, "identity.userAssignedIdentities",
					"%q is not a user-assigned identity id of the form /subscriptions/S/resourceGroups/G/providers/Microsoft.ManagedIdentity/userAssignedIdentities/NAME", k)
			}
		}
	default:
		v.Add(CodeValidationError, "identity.type", "identity type %q is not one of %s", id.Type, identityTypesForErrors)
	}
}

func isUserIdentityID(id string) bool {
	p := strings.Split(strings.Trim(id, "/"), "/")
	return len(p) == 8 && strings.EqualFold(p[0], "subscriptions") && strings.EqualFold(p[2], "resourceGroups") &&
		strings.EqualFold(p[4], "providers") && strings.EqualFold(p[5], "Microsoft.ManagedIdentity") &&
		strings.EqualFold(p[6], "userAssignedIdentities") && p[1] != "" && p[3] != "" && p[7] != ""
}

func isSubnetID(id string) bool {
	p := strings.Split(strings.Trim(id, "/"), "/")
	return len(p) == 10 && strings.EqualFold(p[0], "subscriptions") && strings.EqualFold(p[2], "resourceGroups") &&
		strings.EqualFold(p[4], "providers") && strings.EqualFold(p[5], "Microsoft.Network") &&
		strings.EqualFold(p[6], "virtualNetworks") && strings.EqualFold(p[8], "subnets") && p[7] != "" && p[9] != ""
}

// oneOf returns the canonical spelling of s among allowed (matched
// ignoring case, as ARM does), or "" when s is none of them.
func oneOf(s string, allowed ...string) string {
	for _, a := range allowed {
		if strings.EqualFold(s, a) {
			return a
		}
	}
	return ""
}

func itoa(n int) string { return fmt.Sprint(n) }
