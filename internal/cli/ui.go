package cli

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"time"

	"github.com/spf13/cobra"
)

// signInLink is the answer of POST /ui/codes.
type signInLink struct {
	URL       string `json:"url"`
	Path      string `json:"path"`
	ExpiresIn int    `json:"expiresIn"`
}

func newUICmd(g *globals) *cobra.Command {
	var printURL bool
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Open the web studio in a browser, already signed in",
		Long: `Open the Cumulus web studio (served by 'cumulus serve' at its URL) in a
browser, signed in as the CLI's token. The browser gets a one-time sign-in
link that works once within 60 seconds; the token itself never appears in
the link. With --print-url the link is printed instead of opened.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			var link signInLink
			if _, err := c.Do(cmd.Context(), http.MethodPost, "/ui/codes", nil, &link); err != nil {
				return err
			}
			url := c.Server() + link.Path
			if printURL {
				fmt.Fprintln(g.stdout, url)
				return nil
			}
			if err := openBrowser(url); err != nil {
				fmt.Fprintf(g.stderr, "Could not open a browser (%v). Open this link within %d seconds; it works once:\n", err, link.ExpiresIn)
				fmt.Fprintln(g.stdout, url)
				return nil
			}
			fmt.Fprintf(g.stderr, "Opened the Cumulus studio at %s/ in your browser.\n", c.Server())
			return nil
		},
	}
	cmd.Flags().BoolVar(&printURL, "print-url", false, "print the one-time sign-in link instead of opening a browser")
	return cmd
}

// openBrowser opens url with the desktop's browser ($BROWSER first). On a
// machine without a graphical display (an SSH session, a container) there
// is no browser to open, whatever launcher is installed; a launcher that
// fails soon (xdg-open finds no browser) is a failure too.
func openBrowser(url string) error {
	var name string
	var args []string
	switch {
	case os.Getenv("BROWSER") != "":
		name = os.Getenv("BROWSER")
	case runtime.GOOS == "darwin":
		name = "open"
	case runtime.GOOS == "windows":
		name, args = "rundll32", []string{"url.dll,FileProtocolHandler"}
	default:
		if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
			return errors.New("no graphical display: DISPLAY and WAYLAND_DISPLAY are unset; set $BROWSER to a command that opens a URL")
		}
		name = "xdg-open"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return errors.New("no browser launcher found (" + name + "); set $BROWSER")
	}
	cmd := exec.Command(path, append(args, url)...)
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// A launcher hands the link to a browser and exits; one that is still
	// running after a while is the browser itself, kept in the foreground.
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("%s could not open it: %w", name, err)
		}
	case <-time.After(launcherWait):
	}
	return nil
}

// launcherWait is how long openBrowser waits for the launcher's verdict.
const launcherWait = 5 * time.Second
