package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cumulus-ml/cumulus/internal/client"
)

func newAuthCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "auth", Short: "Manage principals, their tokens and role assignments"}
	principal := &cobra.Command{Use: "principal", Short: "Users and service principals"}
	principal.AddCommand(newPrincipalCreateCmd(g), newPrincipalListCmd(g))
	token := &cobra.Command{Use: "token", Short: "Bearer tokens of principals"}
	token.AddCommand(newTokenCreateCmd(g), newTokenListCmd(g), newTokenRevokeCmd(g))
	role := &cobra.Command{Use: "role", Short: "Role assignments: Owner, Contributor, Reader, ComputeOperator at a scope"}
	role.AddCommand(newRoleAssignCmd(g), newRoleListCmd(g), newRoleRemoveCmd(g))
	cmd.AddCommand(principal, token, role)
	return cmd
}

func newPrincipalCreateCmd(g *globals) *cobra.Command {
	var name, kind string
	cmd := &cobra.Command{
		Use: "create", Short: "Create a principal", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			p, err := c.CreatePrincipal(cmd.Context(), name, kind)
			if err != nil {
				return err
			}
			return g.show("json", p, func() *table { t := &table{header: []string{"NAME", "KIND"}}; t.add(p.Name, p.Kind); return t })
		},
	}
	cmd.Flags().StringVarP(&name, "name", "n", "", "principal name")
	cmd.Flags().StringVar(&kind, "kind", "User", "User or ServicePrincipal")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

func newPrincipalListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use: "list", Short: "List principals", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			ps, err := c.ListPrincipals(cmd.Context())
			if err != nil {
				return err
			}
			return g.show("table", ps, func() *table {
				t := &table{header: []string{"NAME", "KIND", "CREATED"}}
				for _, p := range ps {
					t.add(p.Name, p.Kind, p.Created.Local().Format(time.DateTime))
				}
				return t
			})
		},
	}
}

func newTokenCreateCmd(g *globals) *cobra.Command {
	var principal, expires string
	cmd := &cobra.Command{
		Use: "create", Short: "Create a token for a principal (shown once)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			t, err := c.CreateToken(cmd.Context(), principal, expires)
			if err != nil {
				return err
			}
			fmt.Fprintln(g.stderr, "Store this token now: it is not shown again.")
			return g.show("json", t, func() *table {
				tb := &table{header: []string{"ID", "PRINCIPAL", "TOKEN"}}
				tb.add(t.ID, t.Principal, t.Token)
				return tb
			})
		},
	}
	cmd.Flags().StringVar(&principal, "principal", "", "principal the token acts as")
	cmd.Flags().StringVar(&expires, "expires-in", "", "lifetime, e.g. 24h or PT24H (default: never expires)")
	_ = cmd.MarkFlagRequired("principal")
	return cmd
}

func newTokenListCmd(g *globals) *cobra.Command {
	var principal string
	cmd := &cobra.Command{
		Use: "list", Short: "List tokens (never their secrets)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			ts, err := c.ListTokens(cmd.Context(), principal)
			if err != nil {
				return err
			}
			return g.show("table", ts, func() *table {
				t := &table{header: []string{"ID", "PRINCIPAL", "CREATED", "EXPIRES", "REVOKED"}}
				for _, x := range ts {
					exp := "never"
					if x.Expires != nil {
						exp = x.Expires.Local().Format(time.DateTime)
					}
					t.add(x.ID, x.Principal, x.Created.Local().Format(time.DateTime), exp, x.Revoked)
				}
				return t
			})
		},
	}
	cmd.Flags().StringVar(&principal, "principal", "", "only this principal's tokens")
	return cmd
}

func newTokenRevokeCmd(g *globals) *cobra.Command {
	var id string
	cmd := &cobra.Command{
		Use: "revoke", Short: "Revoke a token", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			return c.RevokeToken(cmd.Context(), id)
		},
	}
	cmd.Flags().StringVar(&id, "id", "", "token id (see 'auth token list')")
	_ = cmd.MarkFlagRequired("id")
	return cmd
}

func roleTable(as []client.RoleAssignment) *table {
	t := &table{header: []string{"ID", "PRINCIPAL", "ROLE", "SCOPE"}}
	for _, a := range as {
		t.add(a.ID, a.Principal, a.Role, a.Scope)
	}
	return t
}

func newRoleAssignCmd(g *globals) *cobra.Command {
	var principal, role, scope string
	cmd := &cobra.Command{
		Use: "assign", Short: "Give a principal a role at a scope", Args: cobra.NoArgs,
		Example: "  cumulus auth role assign --principal alice --role Reader --scope /subscriptions/local/resourceGroups/local",
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if scope == "workspace" {
				scope = c.Scope.WorkspaceID()
			}
			a, err := c.AssignRole(cmd.Context(), principal, role, scope)
			if err != nil {
				return err
			}
			return g.show("json", a, func() *table { return roleTable([]client.RoleAssignment{a}) })
		},
	}
	cmd.Flags().StringVar(&principal, "principal", "", "principal name")
	cmd.Flags().StringVar(&role, "role", "", "Owner, Contributor, Reader or ComputeOperator")
	cmd.Flags().StringVar(&scope, "scope", "workspace", "/ (everything), an ARM id, or 'workspace' for the configured workspace")
	_ = cmd.MarkFlagRequired("principal")
	_ = cmd.MarkFlagRequired("role")
	return cmd
}

func newRoleListCmd(g *globals) *cobra.Command {
	var principal string
	cmd := &cobra.Command{
		Use: "list", Short: "List role assignments", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			as, err := c.ListRoleAssignments(cmd.Context(), principal)
			if err != nil {
				return err
			}
			return g.show("table", as, func() *table { return roleTable(as) })
		},
	}
	cmd.Flags().StringVar(&principal, "principal", "", "only this principal's roles")
	return cmd
}

func newRoleRemoveCmd(g *globals) *cobra.Command {
	var id string
	cmd := &cobra.Command{
		Use: "remove", Short: "Remove a role assignment", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			return c.RemoveRoleAssignment(cmd.Context(), id)
		},
	}
	cmd.Flags().StringVar(&id, "id", "", "assignment id (see 'auth role list')")
	_ = cmd.MarkFlagRequired("id")
	return cmd
}

func newAuditCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "audit", Short: "The audit log of every write"}
	var principal, resource string
	var since time.Duration
	list := &cobra.Command{
		Use: "list", Short: "List audit entries", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			var from time.Time
			if since > 0 {
				from = time.Now().Add(-since)
			}
			es, err := c.ListAudit(cmd.Context(), principal, resource, from)
			if err != nil {
				return err
			}
			return g.show("table", es, func() *table {
				t := &table{header: []string{"TIME", "PRINCIPAL", "OPERATION", "RESOURCE", "STATUS"}}
				for _, e := range es {
					t.add(e.Time.Local().Format(time.DateTime), e.Principal, e.Operation, shortResource(e.Resource), e.Status)
				}
				return t
			})
		},
	}
	list.Flags().StringVar(&principal, "principal", "", "only this principal's writes")
	list.Flags().StringVar(&resource, "resource", "", "only resources under this id")
	list.Flags().DurationVar(&since, "since", 0, "only the last duration (e.g. 1h)")
	cmd.AddCommand(list)
	return cmd
}

// shortResource drops the provider boilerplate of an ARM id for tables.
func shortResource(id string) string {
	if i := strings.Index(id, "/workspaces/"); i >= 0 {
		return id[i+1:]
	}
	return id
}
