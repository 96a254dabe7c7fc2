package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cumulus-ml/cumulus/internal/nodeimage"
)

func newNodeImageCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "node-image",
		Short: "Manage the container image of docker and kubernetes provider nodes",
		Args:  cobra.NoArgs,
	}
	var o nodeimage.Options
	var logLevel string
	build := &cobra.Command{
		Use:   "build",
		Short: "Build the node image from this cumulus binary, busybox and the docker CLI (no registry needed)",
		Long: `Build the image that 'cumulus serve --provider docker' runs as nodes, from
files on this machine: this cumulus binary (it must be statically linked:
CGO_ENABLED=0 go build), a static busybox (Debian's busybox-static) and the
docker CLI, so that the agent inside can run jobs in their images through the
host's Docker socket. Prints the image's tag.`,
		Example: `  CGO_ENABLED=0 go build -o bin/cumulus ./cmd/cumulus
  bin/cumulus node-image build
  bin/cumulus serve --provider docker`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(g, logLevel, "text")
			if err != nil {
				return err
			}
			o.Log = log
			if o.Tag == "" {
				o.Tag = nodeimage.DefaultTag
			}
			if err := nodeimage.BuildWith(cmd.Context(), o); err != nil {
				return err
			}
			fmt.Fprintln(g.stdout, o.Tag)
			return nil
		},
	}
	fl := build.Flags()
	fl.StringVar(&o.Tag, "tag", nodeimage.DefaultTag, "image tag (give the same to 'cumulus serve --node-image')")
	fl.StringVar(&o.Binary, "binary", "", "cumulus binary to put in the image (default: this one)")
	fl.StringVar(&o.DockerCLI, "docker-cli", "", "docker CLI to put in the image (default: a static one found here, else the one on PATH with its libraries)")
	fl.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	cmd.AddCommand(build, newInstallAgentCmd(g))
	return cmd
}

// newInstallAgentCmd copies this binary into a folder: the init container
// of a Kubernetes node pod made from a job's image runs it from the node
// image, so the job's image needs no cumulus of its own.
func newInstallAgentCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "install-agent DIR",
		Short: "Copy this cumulus binary to DIR/cumulus (the agent injected into job images on Kubernetes)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dst, err := nodeimage.InstallSelf(args[0])
			if err != nil {
				return err
			}
			fmt.Fprintln(g.stdout, dst)
			return nil
		},
	}
}
