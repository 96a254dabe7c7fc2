package cli

import "github.com/spf13/cobra"

// newAgentCmd is replaced by the agent implementation.
func newAgentCmd(g *globals) *cobra.Command {
	return &cobra.Command{Use: "agent", Short: "Run the node agent", Hidden: true}
}
